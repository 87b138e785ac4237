"""A simulated month in production: 30 daily labelled batches, a prevalence shift mid-month,
the monitoring loop (`mlcal monitor`) alarming, and the re-offset candidate it builds promoted
through the gate.

    python examples/monitor_month.py                    # throw-away store in a temp directory
    python examples/monitor_month.py --dir month --figures docs/img

Everything is real: a sqlite MLflow store (in ``--dir`` or a temporary directory), a champion
fitted, logged and registered with ``mlcal.mlflow.calibrate_and_log`` and promoted to
``@champion`` by the gate, and every day's batch written to parquet and passed to the loop's
Python entry, :func:`mlcal.monitor.loop.run_batch` (what ``mlcal monitor --model-uri
models:/NAME@champion --data dayNN.parquet --label-column y --state state.json`` runs). The
day-by-day table is printed from the loop's results; ``--figures DIR`` draws the charts the
MLflow UI shows from the metric history read back from the store
(``MlflowClient.get_metric_history``). ``--json FILE`` writes the table and the outcome (the
test reads it). The walk-through is docs/monitoring.md, "A month in production".
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import logit

NAME = "month-clf"
BASE_RATE = 0.2
COLUMNS = ["x1", "x2", "x3"]
CLASS_MEAN_SHIFT = np.array([1.2, -0.8, 0.5])   # the positives' feature means (negatives: 0)
# the metrics charted, as the loop logs them (one point per batch, step = batch number)
CHARTED = ("monitor_e_value", "monitor_offset", "monitor_offset_lower", "monitor_offset_upper",
           "monitor_ece", "monitor_log_loss", "monitor_positive_rate", "monitor_mean_forecast",
           "monitor_alarm")


def day_batch(rng: np.random.Generator, rows: int, base_rate: float) -> pd.DataFrame:
    """One day's matured rows under label shift: the outcome is drawn at ``base_rate``, the
    features from a fixed distribution given the outcome (a prevalence shift moves the base
    rate only, so the right correction of any score is an offset on the log-odds)."""
    y = (rng.random(rows) < base_rate).astype(int)
    X = rng.normal(size=(rows, len(COLUMNS))) + np.outer(y, CLASS_MEAN_SHIFT)
    frame = pd.DataFrame(X, columns=COLUMNS)
    frame["y"] = y
    return frame


def make_champion(rng: np.random.Generator, cal_rows: int, max_ece: float,
                  reports: bool = True) -> None:
    """Fit a deliberately over-regularised logistic model, Platt-calibrate it on held-out rows
    (``calibrate_and_log`` logs, registers version 1), and promote it through the gate;
    ``reports=False`` logs neither HTML report (the calibration's, the gate's)."""
    import mlcal.mlflow
    from mlcal.mlflow.gate import promote
    from sklearn.linear_model import LogisticRegression

    # many calibration rows, so the champion starts well calibrated; fewer for the rest
    train, cal, evaluation, hold = (day_batch(rng, n, BASE_RATE)
                                    for n in (2000, cal_rows, 2000, 2000))
    base = LogisticRegression(C=0.01).fit(train[COLUMNS], train["y"])
    mlcal.mlflow.calibrate_and_log(
        base, cal[COLUMNS], cal["y"], calibrator="platt", X_eval=evaluation[COLUMNS],
        y_eval=evaluation["y"], registered_model_name=NAME, run_name="champion",
        pip_requirements=mlcal.mlflow.get_default_pip_requirements(), html_report=reports)
    decision = promote(NAME, "1", max_ece=max_ece, data=hold, settle_seconds=0.0,
                       report=reports)
    if not decision.promoted:
        raise SystemExit("the first champion did not pass the gate:\n" + decision.explain())


def action(result) -> str:
    if not result.step.alarm:
        return "-"
    if result.decision is None:
        return "wait: too few rows"
    verdict = "promoted" if result.decision.promoted else "refused"
    return f"v{result.candidate_version} {verdict}"


def run_month(workdir: Path, *, days: int, rows: int, shift_day: int, shifted_rate: float,
              seed: int, max_ece: float, gate_min_rows: int | None, diagrams: str,
              reports: bool = True) -> dict:
    """Champion, then ``days`` batches through the loop; returns the table and the outcome."""
    import mlflow

    from mlcal.cli.monitor import read_batch
    from mlcal.monitor.loop import run_batch

    # this script's own store, for tracking and registry alike (whatever MLFLOW_* says)
    mlflow.set_tracking_uri(f"sqlite:///{workdir / 'mlflow.db'}")
    mlflow.set_registry_uri(f"sqlite:///{workdir / 'mlflow.db'}")
    # an explicit artifact location keeps artifacts out of ./mlruns
    mlflow.set_experiment(experiment_id=mlflow.create_experiment(
        "monitor-month", artifact_location=(workdir / "artifacts").as_uri()))
    rng = np.random.default_rng(seed)
    make_champion(rng, 20000, max_ece, reports)
    table = []
    for day in range(1, days + 1):
        path = workdir / f"day{day:02d}.parquet"
        day_batch(rng, rows, shifted_rate if day >= shift_day else BASE_RATE).to_parquet(path)
        result = run_batch(state_path=str(workdir / "state.json"),
                           model_uri=f"models:/{NAME}@champion", frame=read_batch(str(path)),
                           label_column="y", max_ece=max_ece, gate_min_rows=gate_min_rows,
                           gate_options=None if reports else {"report": False},
                           diagrams=diagrams)
        s = result.step
        table.append({"day": day, "version": result.model_version, "batch": s.batch,
                      "rows": s.n_rows, "ece": s.ece, "log_loss": s.log_loss,
                      "offset": s.offset_estimate, "offset_interval": list(s.offset_interval),
                      "e_value": s.e_value, "alarm": s.alarm, "change_batch": s.change_batch,
                      "recommendation": s.recommendation, "action": action(result),
                      "exit_code": result.exit_code,
                      "candidate_version": result.candidate_version, "reason": result.reason,
                      "gate": None if result.decision is None else result.decision.explain()})
    client = mlflow.MlflowClient()
    runs = client.search_runs([mlflow.get_experiment_by_name("monitor-month").experiment_id],
                              "tags.`mlcal.monitor.model_version` != ''",
                              order_by=["attributes.start_time ASC"])
    history = {r.data.tags["mlcal.monitor.model_version"]: {
        key: sorted((m.step, m.value) for m in client.get_metric_history(r.info.run_id, key))
        for key in CHARTED} for r in runs}
    return {"table": table, "history": history, "shift_day": shift_day,
            "base_rate": BASE_RATE, "shifted_rate": shifted_rate,
            "shift": float(logit(shifted_rate) - logit(BASE_RATE)),
            "champion": str(client.get_model_version_by_alias(NAME, "champion").version),
            "runs": {r.data.tags["mlcal.monitor.model_version"]: r.info.run_id for r in runs}}


def print_table(out: dict) -> None:
    print(f"{'day':>3} {'model':>5} {'rows':>5} {'ECE':>6} {'logloss':>7} {'offset':>6} "
          f"{'95% interval':>16} {'e-value':>8}  alarm  recommendation  action")
    for r in out["table"]:
        lo, hi = r["offset_interval"]
        mark = "*" if r["day"] == out["shift_day"] else " "
        print(f"{r['day']:>3}{mark}{'v' + r['version']:>5} {r['rows']:>5} {r['ece']:6.4f} "
              f"{r['log_loss']:7.4f} {r['offset']:+6.2f} [{lo:+6.2f}, {hi:+6.2f}] "
              f"{r['e_value']:8.3g}  {'yes' if r['alarm'] else 'no':>5}  "
              f"{r['recommendation']:<14}  {r['action']}")
    print(f"(* the shift starts: base rate {out['base_rate']:g} -> {out['shifted_rate']:g} from "
          f"day {out['shift_day']} on, log-odds {out['shift']:+.3f}; @champion is now version "
          f"{out['champion']})")
    for r in out["table"]:
        if r["gate"]:
            print(f"\nday {r['day']}: candidate version {r['candidate_version']}, {r['reason']}")
            print(r["gate"])


def day_axis(out: dict) -> dict[str, list[int]]:
    """The calendar day of each monitored version's steps (a new monitor restarts at step 1)."""
    days: dict[str, list[int]] = {}
    for r in out["table"]:
        days.setdefault(r["version"], []).append(r["day"])
    return days


def draw_figures(out: dict, directory: Path) -> list[Path]:
    """The MLflow charts (metric against step), redrawn against the calendar day from the
    metric history read back from the store: one line per monitored version."""
    from matplotlib.figure import Figure

    directory.mkdir(parents=True, exist_ok=True)
    days = day_axis(out)
    colours = ["tab:red", "tab:blue", "tab:green", "tab:purple"]
    fig = Figure(figsize=(11, 7.5), layout="constrained")
    axes = fig.subplots(2, 2, sharex=True).ravel()

    def series(version, key):
        steps = [s for s, _ in out["history"][version][key]]
        values = np.array([v for _, v in out["history"][version][key]])
        return np.array([days[version][s - 1] for s in steps]), values

    for i, version in enumerate(out["history"]):
        c = colours[i % len(colours)]
        label = f"version {version}"
        x, e = series(version, "monitor_e_value")
        axes[0].semilogy(x, e, "o-", color=c, ms=3, label=label)
        x, off = series(version, "monitor_offset")
        _, lo = series(version, "monitor_offset_lower")
        _, hi = series(version, "monitor_offset_upper")
        axes[1].fill_between(x, lo, hi, color=c, alpha=0.2, lw=0)
        axes[1].plot(x, off, "o-", color=c, ms=3, label=f"{label}: estimate, 95 % interval")
        x, ece = series(version, "monitor_ece")
        _, loss = series(version, "monitor_log_loss")
        axes[2].plot(x, ece, "o-", color=c, ms=3, label=f"{label}: ECE")
        axes[2].plot(x, loss, "s--", color=c, ms=3, alpha=0.6, label=f"{label}: log loss")
        x, rate = series(version, "monitor_positive_rate")
        _, mean = series(version, "monitor_mean_forecast")
        axes[3].plot(x, rate, "o-", color=c, ms=3, label=f"{label}: positive rate")
        axes[3].plot(x, mean, "s--", color=c, ms=3, alpha=0.6, label=f"{label}: mean forecast")
    axes[0].axhline(20, color="black", lw=1, ls=":", label="alarm threshold 1/alpha = 20")
    axes[1].axhline(out["shift"], color="black", lw=1, ls=":",
                    label=f"true shift {out['shift']:+.3f}")
    titles = ["monitor_e_value (log scale)", "monitor_offset with _lower/_upper",
              "monitor_ece and monitor_log_loss", "monitor_positive_rate and _mean_forecast"]
    for ax, title in zip(axes, titles):
        ax.axvline(out["shift_day"] - 0.5, color="grey", lw=1, ls="--")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=7, loc="best")
        ax.grid(alpha=0.3)
    for ax in axes[2:]:
        ax.set_xlabel("day (dashed: the shift starts; a new monitor starts after a promotion)")
    fig.suptitle("The loop's MLflow metrics over the month (read back with "
                 "MlflowClient.get_metric_history)", fontsize=11)
    path = directory / "monitor_month_metrics.png"
    fig.savefig(path, dpi=100)
    return [path]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=None,
                    help="directory for the sqlite store, batches and state (default: temporary)")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--rows", type=int, default=500, help="labelled rows per day")
    ap.add_argument("--shift-day", type=int, default=16)
    ap.add_argument("--shifted-rate", type=float, default=0.35,
                    help=f"base rate from --shift-day on (before: {BASE_RATE})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-ece", type=float, default=0.05)
    ap.add_argument("--gate-min-rows", type=int, default=None)
    ap.add_argument("--diagrams", choices=["batch", "alarm", "off"], default="batch",
                    help="CORP reliability diagrams the loop logs (mlcal monitor --diagrams)")
    ap.add_argument("--no-reports", dest="reports", action="store_false",
                    help="log no HTML reports: neither the champion run's calibration report "
                         "nor the gates' reports (mlcal monitor --no-gate-report); the "
                         "metrics, models and decisions are the same")
    ap.add_argument("--figures", default=None, help="draw the metric charts (PNG) into this "
                                                    "directory, e.g. docs/img")
    ap.add_argument("--json", default=None, help="write the table and outcome here")
    args = ap.parse_args(argv)
    settings = dict(days=args.days, rows=args.rows, shift_day=args.shift_day,
                    shifted_rate=args.shifted_rate,
                    seed=args.seed, max_ece=args.max_ece, gate_min_rows=args.gate_min_rows,
                    diagrams=args.diagrams, reports=args.reports)
    if args.dir is None:
        with tempfile.TemporaryDirectory(prefix="mlcal-month-") as tmp:
            out = run_month(Path(tmp), **settings)
    else:
        Path(args.dir).mkdir(parents=True, exist_ok=True)
        out = run_month(Path(args.dir).resolve(), **settings)
    print_table(out)
    if args.figures:
        for path in draw_figures(out, Path(args.figures)):
            print(f"wrote {path}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
