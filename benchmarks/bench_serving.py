"""Latency of a served calibrated model vs the same base model served alone.

Two real `mlflow models serve --env-manager local` servers on 127.0.0.1 (one worker each):

* base:       the scikit-learn model alone (mlflow.sklearn, pyfunc_predict_fn="predict_proba")
* calibrated: the same model wrapped with an mlcal calibrator (mlcal flavour)

Both have the same column signature, so both pay the same JSON parsing and schema enforcement.
Requests alternate between the two servers (so load drift on a shared host hits both alike) over
one keep-alive connection each; single-row and N-row ``dataframe_split`` requests. The goal is
calibrated p50 <= 1.2 x base p50. Also printed: the scoring server's request handler timed
in-process for both models, which isolates the server-side cost from HTTP and host noise.

    python benchmarks/bench_serving.py [--single 300] [--batch 60] [--rows 1000] [--method isotonic]
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

# the server harness is test support code (tests/support/serving.py), not part of mlcal
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def build_models(root: Path, method: str, n_features: int = 10, seed: int = 0):
    import mlflow.sklearn
    from sklearn.linear_model import LogisticRegression

    from mlcal.mlflow import save_model
    from mlcal.model import CalibratedModel

    rng = np.random.default_rng(seed)
    n = 6000
    X = rng.normal(size=(n, n_features))
    logit = X[:, 0] - 0.8 * X[:, 1] + 0.6 * X[:, 2] ** 2 - 0.5
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    df = pd.DataFrame(X, columns=[f"x{i}" for i in range(n_features)])
    base = LogisticRegression().fit(df[:3000], y[:3000])
    model = CalibratedModel(base, method).fit(df[3000:], y[3000:])
    reqs = ["scikit-learn", "numpy", "pandas"]  # explicit: no slow requirement inference
    mlflow.sklearn.save_model(base, str(root / "base"), pyfunc_predict_fn="predict_proba",
                              input_example=df[:3], pip_requirements=reqs)
    save_model(model, str(root / "calibrated"), input_example=df[:3], pip_requirements=reqs)
    return df


def body_for(rows: pd.DataFrame) -> bytes:
    return json.dumps({"dataframe_split": {"columns": list(rows.columns),
                                           "data": rows.to_numpy().tolist()}}).encode()


def post(conn: http.client.HTTPConnection, body: bytes) -> float:
    t0 = time.perf_counter()
    conn.request("POST", "/invocations", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    payload = resp.read()
    dt = time.perf_counter() - t0
    if resp.status != 200:
        raise RuntimeError(f"HTTP {resp.status}: {payload[:300]!r}")
    return dt


def measure(conns: dict, bodies: list[bytes], warmup: int = 10) -> dict[str, np.ndarray]:
    """Latency per request for each server, alternating which one goes first."""
    names = list(conns)
    for i in range(warmup):
        for name in names:
            post(conns[name], bodies[i % len(bodies)])
    times = {name: [] for name in names}
    for i, body in enumerate(bodies):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            times[name].append(post(conns[name], body))
    return {k: np.asarray(v) * 1e3 for k, v in times.items()}


def handler_times(root: Path, bodies: dict[str, bytes], repeats: int) -> dict:
    """Median ms of the scoring server's own request handler (JSON parse, schema enforcement,
    predict, JSON response) run in this process: the server-side cost without HTTP noise."""
    import os

    import mlflow.pyfunc
    from mlflow.pyfunc.scoring_server import invocations

    os.environ["_MLFLOW_IS_IN_SERVING_ENVIRONMENT"] = "true"  # as inside the server
    models = {n: mlflow.pyfunc.load_model(str(root / n)) for n in ("base", "calibrated")}
    out = {}
    for label, body in bodies.items():
        times = {n: [] for n in models}
        for i in range(repeats + 5):
            for n in (list(models) if i % 2 == 0 else list(models)[::-1]):
                m = models[n]
                t0 = time.perf_counter()
                res = invocations(body, "application/json", m, m.metadata.get_input_schema())
                dt = time.perf_counter() - t0
                if res.status != 200:
                    raise RuntimeError(res.response[:300])
                if i >= 5:
                    times[n].append(dt)
        out[label] = {n: float(np.median(v) * 1e3) for n, v in times.items()}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--single", type=int, default=300, help="single-row requests per server")
    ap.add_argument("--batch", type=int, default=60, help="batch requests per server")
    ap.add_argument("--rows", type=int, default=1000, help="rows per batch request")
    ap.add_argument("--method", default="isotonic", help="calibration method")
    args = ap.parse_args()
    if not (0 < args.single <= 5000 and 0 < args.batch <= 1000 and 0 < args.rows <= 100000):
        raise SystemExit("request counts are bounded: single <= 5000, batch <= 1000, rows <= 1e5")

    from support.serving import LocalServer

    with tempfile.TemporaryDirectory(prefix="mlcal-bench-serve-") as tmp:
        root = Path(tmp)
        df = build_models(root, args.method)
        rng = np.random.default_rng(1)
        single = [body_for(df.iloc[[i]]) for i in rng.integers(0, len(df), args.single)]
        starts = rng.integers(0, len(df) - args.rows, args.batch)
        batch = [body_for(df.iloc[s:s + args.rows]) for s in starts]

        servers = {"base": LocalServer(str(root / "base")),
                   "calibrated": LocalServer(str(root / "calibrated"))}
        try:
            for s in servers.values():
                s.start()
            conns = {k: http.client.HTTPConnection("127.0.0.1", s.port, timeout=60)
                     for k, s in servers.items()}
            results = {"1 row": measure(conns, single),
                       f"{args.rows} rows": measure(conns, batch, warmup=3)}
            for c in conns.values():
                c.close()
        finally:
            for s in servers.values():
                s.stop()
        local = handler_times(root, {"1 row": single[0], f"{args.rows} rows": batch[0]},
                              repeats=200)

    print(f"\nmlflow models serve latency, ms (calibrator: {args.method}; "
          f"{args.single} single-row and {args.batch} {args.rows}-row requests per server, "
          "interleaved, keep-alive)")
    print(f"startup to /ping: base {servers['base'].startup_seconds:.1f} s, "
          f"calibrated {servers['calibrated'].startup_seconds:.1f} s")
    head = (f"{'request':<11}{'base p50':>10}{'base p95':>10}{'cal p50':>10}{'cal p95':>10}"
            f"{'p50 ratio':>11}{'p95 ratio':>11}  goal p50 <= 1.2x")
    print(head)
    print("-" * len(head))
    for label, t in results.items():
        b50, b95 = np.percentile(t["base"], [50, 95])
        c50, c95 = np.percentile(t["calibrated"], [50, 95])
        verdict = "met" if c50 <= 1.2 * b50 else "MISSED"
        print(f"{label:<11}{b50:>10.2f}{b95:>10.2f}{c50:>10.2f}{c95:>10.2f}"
              f"{c50 / b50:>10.2f}x{c95 / b95:>10.2f}x  {verdict}")
    print("\nscoring-server handler in-process (parse + schema + predict + JSON), median of 200, "
          "interleaved:")
    for label, t in local.items():
        print(f"{label:<11} base {t['base']:.3f} ms, calibrated {t['calibrated']:.3f} ms "
              f"({t['calibrated'] / t['base']:.2f}x)")


if __name__ == "__main__":
    main()
