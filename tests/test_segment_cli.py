"""Issue #30 item 4: ``mlcal calibrate --segment-columns`` logs the per-segment table of the
held-out rows (a real CLI run on a sqlite store; the segment column is not a model feature).
The runs here skip the HTML report (``--no-html-report``): none is opened; a segmented model's
report is checked in test_segmented_flavor.py, the CLI's default report in test_mlflow_flavor.py."""

import numpy as np
import pandas as pd
import pytest

mlflow = pytest.importorskip("mlflow")


def test_cli_calibrate_logs_segments_of_the_held_out_rows(sqlite_tracking, tmp_path, capsys):
    from sklearn.linear_model import LogisticRegression

    from mlcal.cli import main
    from mlcal.holdout import holdout_split
    from mlcal.metrics import segment_report

    rng = np.random.default_rng(0)
    n = 1400
    X = pd.DataFrame(rng.normal(size=(n, 2)), columns=["a", "b"])
    region = rng.choice(["north", "south"], n)
    shift = np.where(region == "north", 0.7, -0.7)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X["a"].to_numpy() + shift)))).astype(int)
    base = LogisticRegression().fit(X[:600], y[:600])
    model_dir = tmp_path / "base"
    mlflow.sklearn.save_model(base, str(model_dir), pip_requirements=["scikit-learn"])
    csv = tmp_path / "cal.csv"
    X[600:].assign(region=region[600:], y=y[600:]).to_csv(csv, index=False)
    args = ["calibrate", "--model-uri", str(model_dir), "--data", str(csv), "--method", "platt",
            "--no-html-report"]

    runs = len(mlflow.search_runs())
    assert main(args + ["--segment-columns", "region,country"]) == 2
    assert "no segment column(s) ['country']" in capsys.readouterr().err
    assert len(mlflow.search_runs()) == runs            # refused before any run

    assert main(args + ["--segment-columns", "region", "--min-segment-rows", "50"]) == 0
    out = capsys.readouterr().out
    assert "segments by region: 2 (2 with >= 50 rows); worst" in out
    run_id = out.split("run id: ")[1].split()[0]
    table = pd.read_csv(mlflow.MlflowClient().download_artifacts(
        run_id, "calibration/segment_report.csv", str(tmp_path / "dl")))
    # the held-out rows of the CLI's default split, scored by the logged calibrated model
    _, held = holdout_split(y[600:], 0.25, 0)
    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    p = model.predict(X[600:].iloc[held])["p_calibrated"].to_numpy()
    ref = segment_report(y[600:][held], p, region[600:][held], min_segment_rows=50)
    assert table["rows"].sum() == held.size
    assert np.allclose(table["citl"], [s["citl"] for s in ref.table], rtol=0, atol=1e-9)
    metrics = mlflow.MlflowClient().get_run(run_id).data.metrics
    assert metrics["segment_worst_citl"] == pytest.approx(ref.worst["citl"], abs=1e-9)


def test_cli_calibrate_fits_a_segmented_model(sqlite_tracking, tmp_path, capsys):
    """``--segmented``: the logged model is a SegmentedCalibrator keyed by the region column of
    its input; served through pyfunc it equals a SegmentedCalibrator fitted directly on the
    same fit rows, and per region it is right where the global map is not."""
    from sklearn.linear_model import LogisticRegression

    from mlcal import SegmentedCalibrator
    from mlcal.cli import main
    from mlcal.holdout import holdout_split

    rng = np.random.default_rng(1)
    n = 3000
    X = pd.DataFrame(rng.normal(size=(n, 2)), columns=["a", "b"])
    region = rng.choice(["north", "south"], n)
    shift = np.where(region == "north", 1.0, -1.0)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X["a"].to_numpy() + shift)))).astype(int)
    base = LogisticRegression().fit(X[:1000], y[:1000])
    model_dir = tmp_path / "base"
    mlflow.sklearn.save_model(base, str(model_dir), pip_requirements=["scikit-learn"])
    cal = X[1000:].assign(region=region[1000:], y=y[1000:]).reset_index(drop=True)
    csv = tmp_path / "cal.csv"
    cal.to_csv(csv, index=False)
    args = ["calibrate", "--model-uri", str(model_dir), "--data", str(csv), "--method",
            "platt-logit", "--no-html-report"]

    assert main(args + ["--segmented"]) == 2
    assert "--segmented needs --segment-columns" in capsys.readouterr().err

    assert main(args + ["--segmented", "--segment-columns", "region"]) == 0
    out = capsys.readouterr().out
    assert "SegmentedCalibrator" in out
    run_id = out.split("run id: ")[1].split()[0]
    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    assert "region" in model.metadata.get_input_schema().input_names()

    fit_rows, held = holdout_split(cal["y"].to_numpy(), 0.25, 0)
    fit = cal.iloc[fit_rows]
    s_fit = base.predict_proba(fit[["a", "b"]])[:, 1]
    direct = SegmentedCalibrator("platt-logit").fit(s_fit, fit["y"].to_numpy(),
                                                     segments=fit["region"].to_numpy())
    test = cal.iloc[held]
    served = model.predict(test[["a", "b", "region"]])["p_calibrated"].to_numpy()
    s_test = base.predict_proba(test[["a", "b"]])[:, 1]
    expected = direct.predict(s_test, segments=test["region"].to_numpy())
    np.testing.assert_allclose(served, expected, rtol=0, atol=1e-12)
    # the offsets have the sign of the simulated shift
    for name, sign in (("north", 1), ("south", -1)):
        rows = test["region"].to_numpy() == name
        assert sign * (served[rows].mean() - s_test[rows].mean()) > 0.05


def test_cli_calibrate_fits_a_multicalibration_model(sqlite_tracking, tmp_path, capsys):
    """``--feature-columns``: the logged model is a Multicalibration over the score and the
    named columns; served through pyfunc it equals a Multicalibration fitted directly on the
    same fit rows (the same seeded early-stopping split)."""
    from sklearn.linear_model import LogisticRegression

    from mlcal.cli import main
    from mlcal.holdout import holdout_split
    from mlcal.multicalibration import Multicalibration

    rng = np.random.default_rng(2)
    n = 4000
    X = pd.DataFrame(rng.normal(size=(n, 2)), columns=["a", "b"])
    region = rng.choice(["north", "south", "east"], n)
    age = rng.uniform(20, 80, n)
    shift = np.where(region == "north", 1.0, 0.0) - 0.8 * (age > 60)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X["a"].to_numpy() + shift)))).astype(int)
    base = LogisticRegression().fit(X[:1000], y[:1000])
    model_dir = tmp_path / "base"
    mlflow.sklearn.save_model(base, str(model_dir), pip_requirements=["scikit-learn"])
    cal = X[1000:].assign(region=region[1000:], age=age[1000:], y=y[1000:]).reset_index(drop=True)
    csv = tmp_path / "cal.csv"
    cal.to_csv(csv, index=False)
    args = ["calibrate", "--model-uri", str(model_dir), "--data", str(csv),
            "--feature-columns", "region,age", "--no-html-report"]

    assert main(args + ["--method", "platt"]) == 2
    assert "--feature-columns fits a multicalibration model" in capsys.readouterr().err
    assert main(args + ["--segmented", "--segment-columns", "region"]) == 2
    assert "not both" in capsys.readouterr().err

    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Multicalibration" in out
    run_id = out.split("run id: ")[1].split()[0]
    model = mlflow.pyfunc.load_model(f"runs:/{run_id}/model")
    assert {"region", "age"} <= set(model.metadata.get_input_schema().input_names())

    fit_rows, held = holdout_split(cal["y"].to_numpy(), 0.25, 0)
    fit, test = cal.iloc[fit_rows], cal.iloc[held]
    s_fit = base.predict_proba(fit[["a", "b"]])[:, 1]
    direct = Multicalibration().fit(s_fit, fit["y"].to_numpy(), fit[["region", "age"]])
    served = model.predict(test[["a", "b", "region", "age"]])["p_calibrated"].to_numpy()
    s_test = base.predict_proba(test[["a", "b"]])[:, 1]
    expected = direct.predict(s_test, test[["region", "age"]])
    np.testing.assert_allclose(served, expected, rtol=0, atol=1e-12)
    # the correction follows the simulated region effect
    north = test["region"].to_numpy() == "north"
    assert served[north].mean() - s_test[north].mean() > 0.05
