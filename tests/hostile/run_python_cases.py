"""Load every case of the hostile corpus with mlcal, in this process, under an address-space
limit; usage: ``python -m tests.hostile.run_python_cases CASES.json WORK_DIR RESULTS.json``.

For each case: ``mlcal.load_calibrator(Path(path))`` with its wall time and its peak traced
memory (tracemalloc: what the Python objects and numpy arrays of the load took), the outcome
("ok" with the predictions on fixed probe scores written to ``WORK_DIR/p{i}.bin``, "error"
with a CalibratorFormatError's message, or "crash"/"timeout" with what happened), and the exit
code of ``mlcal evaluate`` and ``mlcal export-onnx`` on the same file where the case asks
(``cli``, ``export_onnx``).
Probe scores go to ``WORK_DIR/s{i}.bin`` (float64, little-endian) for the Java evaluator.
"""

from __future__ import annotations

import contextlib
import io
import json
import resource
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

#: a case that computes too long becomes a "timeout" result: a budget of CPU seconds (the
#: process's, ITIMER_PROF), which a loaded machine does not use up (a wall-clock budget did:
#: isotonic/bomb-zeros, ~3 s of CPU, ran out of 20 s at load average 7-17)
CASE_TIMEOUT_S = 20
#: a hang (a FIFO opened for reading blocks until a writer appears, using no CPU) becomes a
#: "timeout" result too: a wall-clock alarm, loose enough for a loaded machine
CASE_WALL_TIMEOUT_S = 120
#: hard backstop above the process's size when the cases start
ADDRESS_SPACE_HEADROOM = 3 * 1024 ** 3
BINARY_PROBE = np.array([-5.0, -0.5, 0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 3.0, 1e-300, 0.3])
#: for a document that did not load: 6 values, whole rows for K = 1, 2, 3 or 6
FALLBACK_PROBE = np.array([0.1, 0.5, 0.9, -1.0, 2.0, 0.3])


class CaseTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise CaseTimeout()


def _arm() -> None:
    """Start the case's CPU budget and its wall-clock alarm (both raise CaseTimeout)."""
    signal.setitimer(signal.ITIMER_PROF, CASE_TIMEOUT_S)
    signal.alarm(CASE_WALL_TIMEOUT_S)


def _disarm() -> None:
    signal.setitimer(signal.ITIMER_PROF, 0)
    signal.alarm(0)


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _cli(args: list[str]) -> tuple[int, str]:
    from mlcal.cli import main

    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(args)
        except SystemExit as exc:   # argparse
            code = int(exc.code or 0)
    return code, err.getvalue()[-300:]


def _segment_probe(m):
    """Segment rows for :data:`BINARY_PROBE` under a segmented map ``m``: its keys in turn,
    and (under ``unseen="shared"``) one row with a missing value, which gets the shared map."""
    import pandas as pd

    names = [name for name, _ in m.columns]
    keys = [list(m.keys[j % len(m.keys)]) for j in range(BINARY_PROBE.size)]
    if m.unseen == "shared":
        keys[-1][0] = None
    return pd.DataFrame(keys, columns=names, dtype=object)


def _jsonl(scores: np.ndarray, rows) -> str:
    lines = []
    for x, values in zip(scores, rows.itertuples(index=False)):
        row = {"score": float(x)}
        row.update({c: (v.item() if hasattr(v, "item") else v)
                    for c, v in zip(rows.columns, values)})
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def run(cases: list[dict], work: Path, data_csv: Path) -> list[dict]:
    import mlcal

    rng = np.random.default_rng(0)
    results = []
    tracemalloc.start()
    for i, case in enumerate(cases):
        path = Path(case["path"])
        size = path.stat().st_size if path.is_file() else 0
        tracemalloc.clear_traces()
        tracemalloc.reset_peak()
        _arm()
        t0, c0 = time.perf_counter(), time.process_time()
        res: dict = {"name": case["name"], "size": size}
        try:
            cal = mlcal.load_calibrator(path)
            res["outcome"] = "ok"
        except mlcal.CalibratorFormatError as exc:
            res["outcome"], res["message"] = "error", str(exc)[:400]
        except CaseTimeout:
            res["outcome"], res["message"] = "timeout", (f"over {CASE_TIMEOUT_S} s of CPU or "
                                                         f"{CASE_WALL_TIMEOUT_S} s of wall time")
        except BaseException as exc:   # noqa: BLE001 - any other exception is the finding
            res["outcome"], res["message"] = "crash", f"{type(exc).__name__}: {exc}"[:400]
        finally:
            _disarm()
        res["seconds"] = time.perf_counter() - t0
        res["cpu_seconds"] = time.process_time() - c0
        res["peak_bytes"] = tracemalloc.get_traced_memory()[1]
        probe = FALLBACK_PROBE
        rows = None
        if res["outcome"] == "ok" and hasattr(cal.map_, "keys"):   # a segmented calibrator
            rows = _segment_probe(cal.map_)
            np.ascontiguousarray(cal.predict(BINARY_PROBE, rows),
                                 dtype="<f8").tofile(work / f"p{i}.bin")
            del cal
        elif res["outcome"] == "ok":
            k = getattr(cal.map_, "n_classes", None)
            res["n_classes"] = k
            probe = BINARY_PROBE if k is None else rng.normal(0.0, 2.0, (4, k))
            if cal.map_.kind == "multicalibration":   # takes probabilities only
                probe = np.clip(BINARY_PROBE, 0.0, 1.0)
            np.ascontiguousarray(cal.predict(probe) if k is None else cal.predict_proba(probe),
                                 dtype="<f8").tofile(work / f"p{i}.bin")
            del cal
        if rows is None:
            np.ascontiguousarray(probe, dtype="<f8").tofile(work / f"s{i}.bin")
        else:   # the Java evaluator reads a segmented calibrator's rows as JSON lines
            (work / f"s{i}.bin").write_text(_jsonl(BINARY_PROBE, rows), encoding="utf-8")
        results.append(res)
        if not case.get("cli"):
            continue
        # the command line loads through the same function: same verdict, exit 0 or 2
        args = ["evaluate", "--calibrator", str(path), "--data", str(data_csv)]
        if res.get("n_classes"):
            args += ["--score-columns", ",".join(f"c{j}" for j in range(res["n_classes"]))]
        _arm()
        try:
            res["evaluate_exit"], res["evaluate_err"] = _cli(args)
        except CaseTimeout:
            res["evaluate_exit"], res["evaluate_err"] = -1, "timeout"
        finally:
            _disarm()
        if case.get("export_onnx"):
            out = work / f"m{i}.onnx"
            res["export_exit"], res["export_err"] = _cli(
                ["export-onnx", "--calibrator", str(path), "--out", str(out)])
    return results


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    work = Path(sys.argv[2])
    # data for `mlcal evaluate`: a binary score column and three class columns
    rng = np.random.default_rng(1)
    n = 50
    cols = {"score": rng.random(n), "y": (rng.random(n) < 0.5).astype(int)}
    cols.update({f"c{j}": rng.normal(size=n) for j in range(6)})
    data_csv = work / "data.csv"
    lines = [",".join(cols)] + [",".join(repr(float(cols[c][r])) if c != "y"
                                         else str(cols[c][r]) for c in cols) for r in range(n)]
    data_csv.write_text("\n".join(lines) + "\n")
    import functools

    import mlcal.cli
    import mlcal.cli.evaluate  # noqa: F401  (imports outside the measured loads)
    import mlcal.onnx  # noqa: F401

    # `mlcal.cli.main` as the command runs it, with its argument parser built once (building
    # it for every case took most of this script's time)
    mlcal.cli.build_parser = functools.lru_cache(maxsize=None)(mlcal.cli.build_parser)
    # build it now, before the address-space limit and outside every case's alarm: it imports
    # each command's module (mlflow among them, which can take over CASE_TIMEOUT_S on a loaded
    # machine); an import cut short by either left mlflow half-initialised and every later
    # command failing
    mlcal.cli.build_parser()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_size() + ADDRESS_SPACE_HEADROOM
    if hard == resource.RLIM_INFINITY or limit < hard:
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    signal.signal(signal.SIGALRM, _alarm)
    signal.signal(signal.SIGPROF, _alarm)
    results = run(cases, work, data_csv)
    Path(sys.argv[3]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
