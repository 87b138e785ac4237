"""The calibration monitor fed from Spark (statistics aggregated in Spark) against the
in-memory monitor fed the same batches: the same state to rounding, the same rows in every
bin, the same alarm, change estimate and recommendation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit

from mlcal.monitor.sequential import _BIN_EDGES, CalibrationMonitor


def _flat(doc, prefix=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _flat(v, f"{prefix}.{k}")
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _flat(v, f"{prefix}[{i}]")
    else:
        yield prefix, doc


def _batches():
    """Six batches, the last three with an offset of +1 logit; exact 0, 1 and 1/2 forecasts
    (clipped), forecasts on logit-bin edges, weighted and unweighted batches."""
    rng = np.random.default_rng(3)
    for t in range(6):
        p = rng.random(300)
        p[:3] = [0.0, 1.0, 0.5]
        p[3:8] = expit(np.array([-3.0, -0.25, 0.25, 1.0, 2.75]))    # on bin edges (or next to)
        shift = 0.0 if t < 3 else 1.2
        y = (rng.random(p.size) < expit(logit(np.clip(p, 1e-9, 1 - 1e-9)) + shift)) * 1.0
        yield p, y, (rng.random(p.size) * 3 if t % 2 else None)


def test_spark_batches_give_the_in_memory_monitor_state(spark):
    from mlcal.spark.monitor_batches import update_from_spark

    memory, in_spark = CalibrationMonitor(active_starts=3), CalibrationMonitor(active_starts=3)
    for p, y, w in _batches():
        expected = memory.update(p, y, w)
        cols = {"p": p, "y": (y == 1), "w": np.ones(p.size) if w is None else w}
        df = spark.createDataFrame(pd.DataFrame(cols)).repartition(3)   # any row order
        got = update_from_spark(in_spark, df, "p", "y", None if w is None else "w")
        for key, value in expected.as_dict().items():
            if isinstance(value, (bool, int, str)) or value is None:
                assert got.as_dict()[key] == value, key
            else:
                # the offset estimate and its interval are a maximum-likelihood fit whose
                # likelihood is flat at the top: its Newton steps stop where the likelihood
                # no longer changes in float64, so inputs equal to rounding give it to ~1e-9
                tol = 1e-6 if key.startswith("offset_") and key != "offset_cs" else 1e-12
                np.testing.assert_allclose(got.as_dict()[key], value, rtol=tol, atol=tol,
                                           err_msg=key)
        if w is None:
            # counts per bin are integers: every row is in the bin the in-memory route chose
            np.testing.assert_array_equal(in_spark._bins[-1][:2], memory._bins[-1][:2])
    assert memory.alarm and in_spark.alarm_batch == memory.alarm_batch
    assert in_spark.recommendation == memory.recommendation
    assert in_spark.change_batch == memory.change_batch
    a, b = dict(_flat(memory.to_dict())), dict(_flat(in_spark.to_dict()))
    assert a.keys() == b.keys()
    for key, value in a.items():
        if isinstance(value, float):
            # the sums (moments, bins, the start processes' log e-values) to rounding; the
            # confidence sequence bets against an offset MLE (see above): its log e-values
            # to 1e-6 (here ~2e-7: e-values within a factor 1 +- 1e-6)
            if key.startswith(".cs_log_e"):
                assert abs(b[key] - value) <= 1e-6, key
            else:
                assert abs(b[key] - value) <= 1e-12 * max(1.0, abs(value)), key
        else:
            assert b[key] == value, key


def test_logit_bin_thresholds_reproduce_the_in_memory_bins():
    from mlcal.spark.monitor_batches import logit_bin_thresholds

    thresholds = logit_bin_thresholds()
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.random(200_000), expit(_BIN_EDGES), thresholds[np.isfinite(
        thresholds)], np.nextafter(thresholds[np.isfinite(thresholds)], 0)])
    p = np.clip(p, 1e-6, 1 - 1e-6)
    expected = np.clip(np.searchsorted(_BIN_EDGES, logit(p), side="right") - 1, 0,
                       _BIN_EDGES.size - 2)
    np.testing.assert_array_equal(np.searchsorted(thresholds, p, side="right"), expected)


def test_bad_spark_batches_are_named(spark):
    from mlcal.spark.monitor_batches import update_from_spark

    monitor = CalibrationMonitor()
    cases = [([0.2, 1.5], [0, 1], None, "p must lie in \\[0, 1\\]; 1 value"),
             ([0.2, None], [0, 1], None, "p contains 1 null"),
             ([0.2, 0.4], [0, 2], None, "labels must be 0 or 1"),
             ([0.2, 0.4], [0, 1], [1.0, -1.0], "1 negative"),
             ([0.2, 0.4], [0, 1], [0.0, 0.0], "sums to zero")]
    for p, y, w, message in cases:
        cols = {"p": p, "y": y, **({} if w is None else {"w": w})}
        df = spark.createDataFrame(pd.DataFrame(cols))
        with pytest.raises(ValueError, match=message):
            update_from_spark(monitor, df, "p", "y", None if w is None else "w")
    assert monitor.n_batches == 0                    # nothing was counted
    with pytest.raises(ValueError, match="score column 'q' is not in the DataFrame"):
        update_from_spark(monitor, spark.createDataFrame(pd.DataFrame({"p": [0.5], "y": [1]})),
                          "q", "y")


# --- the loop's Spark-table route (mlcal monitor --spark-table) ------------------------------

def test_the_loop_on_spark_tables_follows_the_in_memory_loop(spark, sqlite_tracking, tmp_path,
                                                              capsys):
    """The same batches fed to the monitoring loop as files and as Spark tables (with a sample
    smaller than the batch): the same alarm at the same batch, offsets and e-values to rounding;
    through the CLI, and with the errors a user meets named."""
    import json

    from test_monitor_loop import COLS, NAME, batch, champion

    from mlcal.cli import main
    from mlcal.monitor.loop import run_batch
    from mlcal.spark.monitor_batches import monitor_spark_table

    rng = np.random.default_rng(5)
    model = champion(rng)
    mem_state, spark_state = str(tmp_path / "mem.json"), str(tmp_path / "spark.json")
    uri = f"models:/{NAME}@champion"
    steps = []
    for i in range(6):
        frame = batch(rng, offset=0.0 if i < 3 else 1.5)
        frame["p"] = model.predict_proba(frame[COLS])[:, 1]
        mem = run_batch(state_path=mem_state, model_uri=uri, frame=frame, label_column="y",
                        score_column="p", build=False, diagrams="off")
        sample, update = monitor_spark_table(spark.createDataFrame(frame), label_col="y",
                                             score_col="p", sample_rows=150, seed=i)
        assert len(sample) <= 150
        via_spark = run_batch(state_path=spark_state, model_uri=uri, frame=sample,
                              label_column="y", score_column="p", build=False, diagrams="off",
                              monitor_update=update)
        a, b = mem.step, via_spark.step
        assert (a.batch, a.n_rows, a.alarm, a.recommendation) == \
            (b.batch, b.n_rows, b.alarm, b.recommendation)
        assert b.n_rows == len(frame)             # every row counted, not the sample's
        assert np.isclose(a.e_value, b.e_value, rtol=1e-6)
        assert np.isclose(a.offset_estimate, b.offset_estimate, rtol=1e-6, atol=1e-9)
        steps.append(a.alarm)
    assert not any(steps[:3]) and steps[-1]       # quiet before the shift, alarmed after
    # through the CLI: a registered temp view, the batch counted, the metrics logged
    frame = batch(rng)
    frame["p"] = model.predict_proba(frame[COLS])[:, 1]
    spark.createDataFrame(frame).createOrReplaceTempView("monitor_batch")
    state = str(tmp_path / "cli.json")
    args = ["monitor", "--model-uri", uri, "--spark-table", "monitor_batch", "--label-column",
            "y", "--state", state, "--diagrams", "off"]
    assert main(args + ["--score-column", "p"]) == 0
    assert json.loads(open(state).read())["step"] == 1
    # named errors: no score column; both inputs; a label the model does not know
    assert main(args) == 2
    assert "--spark-table needs --score-column" in capsys.readouterr().err
    assert main(args + ["--score-column", "p", "--data", "x.csv"]) == 2
    assert "exactly one of --data FILE or --spark-table NAME" in capsys.readouterr().err
    bad = frame.assign(y=frame["y"].where(frame.index != 7, 9))
    spark.createDataFrame(bad).createOrReplaceTempView("monitor_bad")
    _, update = monitor_spark_table(spark.table("monitor_bad"), label_col="y", score_col="p")
    with pytest.raises(Exception, match="label column 'y' holds 9"):
        update(CalibrationMonitor(), model)
