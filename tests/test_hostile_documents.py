"""The hostile-document corpus (``tests/hostile/make_documents.py``: hundreds of broken
calibrator documents made from real fitted calibrators of every method (a segmented one
included, with its tampered segment tables), plus FIFO, device,
socket, directory and symlink paths) against both loaders.

Every case must end in a named error or a correct load, the same verdict from
``mlcal.load_calibrator``, ``mlcal evaluate``, ``mlcal export-onnx`` (where run) and the Java
evaluator, with identical predictions when it loads. Python loads every case in one
subprocess under an address-space limit, with per-case wall time and traced peak memory
asserted against generous bounds; the Java evaluator scores every case in one JVM with a
256 MiB heap.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tests.hostile.make_documents import BOMB_BYTES, MULTICLASS, generate

ROOT = Path(__file__).resolve().parents[1]
#: per-case bounds: generous (a valid 8 MiB document loads in well under a second here), in
#: CPU seconds, which a loaded machine does not inflate (the Java batch keeps a wall bound)
MAX_CASE_SECONDS = 30.0
#: traced peak of one load: a small multiple of the document's size, plus fixed overhead
MEMORY_FACTOR, MEMORY_SLACK = 8, 32 * 1024 ** 2
JAVA_HEAP = "256m"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """The cases and, per case, what the Python loader and the CLI did."""
    base = tmp_path_factory.mktemp("hostile")
    cases = generate(base / "docs")
    work = base / "work"
    work.mkdir()
    (base / "cases.json").write_text(json.dumps(cases))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "tests.hostile.run_python_cases",
                           str(base / "cases.json"), str(work), str(base / "results.json")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((base / "results.json").read_text())
    return cases, results, work


def test_corpus_covers_every_method_and_trap(corpus):
    import mlcal

    cases, results, _ = corpus
    assert len(cases) >= 250
    loaded = {c["name"].split("/")[0] for c, r in zip(cases, results)
              if c["name"].endswith("/valid") and r["outcome"] == "ok"}
    methods = set(mlcal.available_calibrators())
    assert methods <= loaded, methods - loaded
    multiclass = {json.loads(Path(c["path"]).read_text())["method"] for c in cases
                  if c["name"].endswith("/valid")}
    assert set(MULTICLASS) <= multiclass
    names = {c["name"].split("/", 1)[1] for c in cases}
    for trap in ("fifo", "dev-zero", "socket", "directory", "symlink-to-fifo",
                 "bomb-empty-arrays", "bomb-zeros", "decreasing-map", "map-of-kind-step",
                 # quadratic maps: non-finite coefficients, bad floor, unknown fields
                 "quadratic-a-huge", "quadratic-b-null", "quadratic-floor-half",
                 "quadratic-on-unknown", "quadratic-unknown-field",
                 "quadratic-margin-with-sigmoid",
                 # the beta/quadratic score clamp: out of range, malformed, on a margin map
                 "clamp-widest", "clamp-lo-zero", "clamp-hi-one", "clamp-strings",
                 "quadratic-margin-with-clamp"):
        assert trap in names
    # the segmented calibrator: its valid document loads, and every tampered segment-table
    # case of tests/hostile/segmented_cases.py is in the corpus (and refused: see below)
    from tests.hostile.segmented_cases import TAMPERED

    seg = {c["name"]: r for c, r in zip(cases, results) if c["name"].startswith("segmented/")}
    assert seg["segmented/valid"]["outcome"] == "ok"
    for label in TAMPERED:
        assert seg["segmented/tampered-" + label.replace(" ", "-")]["outcome"] == "error", label
    assert seg["segmented/bare-segmented-map"]["outcome"] == "error"
    assert len(seg) >= len(TAMPERED) + 30


def test_python_loader_names_every_problem_within_bounds(corpus):
    cases, results, _ = corpus
    problems = []
    for case, res in zip(cases, results):
        name, outcome = case["name"], res["outcome"]
        if outcome not in ("ok", "error"):
            problems.append(f"{name}: {outcome}: {res.get('message')}")
        elif case["expect"] == "load" and outcome != "ok":
            problems.append(f"{name}: should load, got {res['message']}")
        elif case["expect"] == "error" and outcome != "error":
            problems.append(f"{name}: loaded, should be refused")
        if res["cpu_seconds"] > MAX_CASE_SECONDS:
            problems.append(f"{name}: took {res['cpu_seconds']:.1f} s of CPU "
                            f"({res['seconds']:.1f} s of wall time)")
        bound = MEMORY_FACTOR * res["size"] + MEMORY_SLACK
        if res["peak_bytes"] > bound:
            problems.append(f"{name}: peak {res['peak_bytes'] / 2 ** 20:.0f} MiB for a "
                            f"{res['size'] / 2 ** 20:.1f} MiB document")
        if "evaluate_exit" not in res:
            continue
        # the command line loads through the same function: the same verdict
        if (res["evaluate_exit"] == 0) != (outcome == "ok") or res["evaluate_exit"] not in (0, 2):
            problems.append(f"{name}: mlcal evaluate exited {res['evaluate_exit']} "
                            f"({res['evaluate_err']!r}) for a load {outcome}")
        if outcome == "error" and res.get("message", "")[:60] not in res["evaluate_err"]:
            problems.append(f"{name}: mlcal evaluate does not name the problem")
        if "export_exit" in res and (res["export_exit"] == 0) != (outcome == "ok"):
            problems.append(f"{name}: mlcal export-onnx exited {res['export_exit']} for a "
                            f"load {outcome}")
    assert not problems, "\n".join(problems[:40])
    # the element bombs were refused before parsing: memory far below what parsing takes
    bombs = [r for c, r in zip(cases, results) if "bomb" in c["name"]]
    assert len(bombs) >= 6 and all(r["size"] > BOMB_BYTES // 2 for r in bombs)
    assert all("arrays and objects" in r["message"] or "strings" in r["message"]
               for r in bombs if "zeros" not in r["name"]), [r["message"] for r in bombs]


def test_java_evaluator_agrees_within_a_small_heap(corpus, jar, tmp_path):  # jar: conftest.py
    cases, results, work = corpus
    lines = [f"{c['path']}\t{work / f's{i}.bin'}\t{tmp_path / f'o{i}.bin'}"
             for i, c in enumerate(cases)]
    (tmp_path / "jobs.txt").write_text("\n".join(lines) + "\n")
    t0 = time.perf_counter()
    proc = subprocess.run(["java", f"-Xmx{JAVA_HEAP}", "-jar", str(jar), "--batch",
                           str(tmp_path / "jobs.txt")], capture_output=True, text=True,
                          timeout=300)
    seconds = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr[-3000:]   # an OutOfMemoryError would end here
    assert seconds < MAX_CASE_SECONDS * 4, seconds
    problems = []
    for i, (case, res) in enumerate(zip(cases, results)):
        err = tmp_path / f"o{i}.bin.err"
        java_error = err.read_text() if err.exists() else None
        if res["outcome"] == "ok":
            if java_error is not None:
                problems.append(f"{case['name']}: Python loads it, Java: {java_error[:200]}")
                continue
            got = np.fromfile(tmp_path / f"o{i}.bin", dtype="<u8")
            want = np.fromfile(work / f"p{i}.bin", dtype="<u8")
            if not np.array_equal(got, want):
                problems.append(f"{case['name']}: predictions differ")
        elif java_error is None or not java_error.startswith("MapFormatException: "):
            problems.append(f"{case['name']}: Python refuses it ({res['message'][:150]}), "
                            f"Java: {java_error or 'loaded it'}")
    assert not problems, "\n".join(problems[:40])
