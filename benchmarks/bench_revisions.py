"""A change's cost: a base revision's mlcal against the working tree's, measured in one run.

Run: ``python benchmarks/bench_revisions.py [--base main] [--rounds 2] [--n 200000]``

The base revision's ``mlcal/`` package is extracted (``git archive``) into a temporary folder and
put first on ``PYTHONPATH``; the working tree's runs from the installed (editable) package.
Each round runs, for both trees in alternating order (ABBA, the machine may be shared):

* the map-dispatch paths directly: ``to_onnx``, ``map_nodes``, ``error_bound``, ``map_from_dict``
  on step/linear/sigmoid maps (also with the sigmoid input transform), best-of-7 seconds;
* ``bench_onnx.py --quick`` (onnxruntime times of the exported graphs);
* ``bench_calibrators.py --sizes 1e5 --no-memory``, its predict column.

The table gives each measurement's best over the rounds per tree and the ratio after/before.
It also states whether both trees export byte-identical ONNX models, identical error bounds and
identical JSON for those maps (a refactoring should keep all three).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _maps():
    import numpy as np
    from mlcal.maps import LinearMap, SigmoidMap, StepMap

    rng = np.random.default_rng(0)
    t = np.sort(rng.uniform(0, 1, 999))
    v = np.sort(rng.uniform(0, 1, 1000))
    return {"step": StepMap(t, v), "linear": LinearMap(np.sort(rng.uniform(0, 1, 1000)), v),
            "sigmoid": SigmoidMap(-3.0, 1.0),
            "step_sig": StepMap(t, v, input_transform="sigmoid"),
            "linear_sig": LinearMap(np.sort(rng.uniform(-3, 3, 1000)), v,
                                    input_transform="sigmoid")}


def micro() -> None:
    """Child mode: time the dispatch paths and fingerprint their results; print JSON."""
    import numpy as np
    import mlcal
    from mlcal.maps import map_from_dict
    from mlcal.onnx import error_bound, to_onnx
    from mlcal.onnx._graph import GraphBuilder
    from mlcal.onnx._maps import map_nodes

    sys.path.insert(0, str(HERE))
    from _timing import best_time

    times, prints = {}, {}
    for name, m in _maps().items():
        doc = json.loads(json.dumps(m.to_dict()))
        for dt in ("float64", "float32"):
            model = to_onnx(m, dtype=dt).SerializeToString()
            prints[f"onnx {name} {dt}"] = hashlib.sha256(model).hexdigest()
            prints[f"bound {name} {dt}"] = repr(error_bound(m, dt))
        prints[f"json {name}"] = json.dumps(m.to_dict())
        f64 = np.dtype("float64")
        times[f"to_onnx {name}"] = best_time(lambda: to_onnx(m), 7)
        times[f"map_nodes {name}"] = best_time(lambda: map_nodes(GraphBuilder("x"), "s", m, f64),
                                               7)
        times[f"error_bound f32 {name}"] = best_time(lambda: error_bound(m, "float32"), 7)
        times[f"map_from_dict {name}"] = best_time(lambda: map_from_dict(doc), 7)
    print(json.dumps({"file": mlcal.__file__, "time": times, "fp": prints}))


def _run(pythonpath: str | None, args: list[str]) -> str:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True,
                          check=True, cwd=tempfile.gettempdir()).stdout


def _parse(out_onnx: str, out_cal: str) -> dict[str, float]:
    found = {}
    for m in re.finditer(r"^\s+(\d+) (step|linear)\s+(float\d+)\s+([\d.]+)\s+([\d.]+) \(",
                         out_onnx, re.M):
        found[f"onnx K={m[1]} {m[2]} {m[3]} auto ms"] = float(m[5])
    for m in re.finditer(r"(float\d+): scipy\s+([\d.]+) ms, onnxruntime\s+([\d.]+)", out_onnx):
        found[f"onnx sigmoid map {m[1]} ms"] = float(m[3])
    for m in re.finditer(r"(\w+)\s+\(K=\s*\d+\) (float\d+): base graph\s+([\d.]+) ms, "
                         r"composed\s+([\d.]+)", out_onnx):
        found[f"onnx composed {m[1]} {m[2]} ms"] = float(m[4])
    for line in out_cal.splitlines():
        p = line.split()
        if len(p) == 9 and p[0].isdigit():
            found[f"predict N={p[0]} {p[1]} ({p[2]} {p[3]}) s"] = float(p[6])
    return found


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="main", help="git revision to compare against")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--n", type=int, default=200_000, help="scores per bench_onnx call")
    ap.add_argument("--micro", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.micro:
        micro()
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        archive = Path(tmp) / "base.tar"
        with open(archive, "wb") as fh:
            subprocess.run(["git", "-C", str(REPO), "archive", args.base, "mlcal"], stdout=fh,
                           check=True)
        with tarfile.open(archive) as tar:
            # the "data" filter (no absolute paths or links out) where this Python has it
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(Path(tmp) / "base", **safe)
        trees = {"before": str(Path(tmp) / "base"), "after": None}
        best: dict[str, dict[str, float]] = {"before": {}, "after": {}}
        prints = {}
        for r in range(args.rounds):
            for tree in ("before", "after") if r % 2 == 0 else ("after", "before"):
                out = json.loads(_run(trees[tree], [__file__, "--micro"]))
                if tree == "before" and not out["file"].startswith(trees["before"]):
                    raise RuntimeError(f"the base tree was not imported: {out['file']}")
                prints.setdefault(tree, out["fp"])
                found = {"dispatch: " + k: v for k, v in out["time"].items()}
                found.update(_parse(
                    _run(trees[tree], [str(HERE / "bench_onnx.py"), "--quick", "--n",
                                       str(args.n)]),
                    _run(trees[tree], [str(HERE / "bench_calibrators.py"), "--sizes", "1e5",
                                       "--no-memory", "--repeats", "3"])))
                for k, v in found.items():
                    best[tree][k] = min(best[tree].get(k, math.inf), v)
    same = prints["before"] == prints["after"]
    print(f"base {args.base} vs working tree, best of {args.rounds} interleaved rounds")
    print(f"identical ONNX bytes, error bounds and JSON for {len(_maps())} maps: {same}")
    for k in prints["before"]:
        if prints["before"][k] != prints["after"].get(k):
            print(f"  differs: {k}")
    print(f"\n{'measurement':<52} {'before':>10} {'after':>10} {'after/before':>13}")
    ratios = []
    for k, b in best["before"].items():
        a = best["after"].get(k)
        if a is None or b <= 0:
            continue
        ratios.append(a / b)
        print(f"{k:<52} {b:>10.4g} {a:>10.4g} {a / b:>13.2f}")
    print(f"\ngeometric mean after/before over {len(ratios)} rows: "
          f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
