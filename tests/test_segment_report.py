"""Issue #30 item 4: :func:`mlcal.metrics.segment_report`.

Every per-segment number is checked against a plain loop over the segments with the existing
metric functions; the calibration-in-the-large interval against Wilson's interval
(:func:`mlcal.metrics.proportion_interval`) where they must agree and by a coverage simulation;
sample weights against duplicated rows."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from mlcal import metrics as M
from mlcal.metrics import SegmentReport, segment_report
from mlcal.metrics.multiclass import multiclass_brier, multiclass_log_loss, top_label_ece
from mlcal.metrics.segments import (MissingSegmentKeyError, NaNProbabilityError,
                                   NoEligibleSegmentError, SegmentLengthError,
                                   offset_score_interval)


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    region = rng.choice(["north", "south", "east", "west"], n, p=[0.4, 0.3, 0.27, 0.03])
    plan = rng.choice(["basic", "pro"], n)
    p = rng.uniform(0.05, 0.95, n)
    truth = np.where(region == "north", np.clip(p + 0.12, 0, 1), p)  # north under-predicted
    y = (rng.random(n) < truth).astype(int)
    return y, p, region, plan


def test_every_statistic_equals_a_loop_over_segments_with_the_metric_functions():
    y, p, region, plan = _data()
    keys = pd.DataFrame({"region": region, "plan": plan})
    rep = segment_report(y, p, keys, min_segment_rows=50, n_bins=8, strategy="quantile")
    assert rep.columns == ["region", "plan"]
    expected_keys = sorted({(r, q) for r, q in zip(region, plan)})
    assert [(s["key"]["region"], s["key"]["plan"]) for s in rep.table] == expected_keys
    for s in rep.table:
        rows = (region == s["key"]["region"]) & (plan == s["key"]["plan"])
        ys, ps = y[rows], p[rows]
        assert s["rows"] == rows.sum() == s["weight"]
        assert s["positives"] == ys.sum()
        assert s["ece"] == M.ece(ys, ps, 8, "quantile")
        assert s["log_loss"] == pytest.approx(M.log_loss(ys, ps), rel=1e-12)
        assert s["brier"] == pytest.approx(M.brier(ys, ps), rel=1e-12)
        assert s["observed_rate"] == pytest.approx(ys.mean(), rel=1e-12)
        assert s["mean_prediction"] == pytest.approx(ps.mean(), rel=1e-12)
        assert s["citl"] == pytest.approx(ys.mean() - ps.mean(), abs=1e-12)
        assert s["citl_lower"] <= s["citl"] <= s["citl_upper"]
        assert s["eligible"] == (rows.sum() >= 50)
        assert s["label"] == f"region={s['key']['region']}, plan={s['key']['plan']}"
    # the logit offset at its estimate reproduces the observed rate
    north = rep.table[[s["key"]["region"] for s in rep.table].index("north")]
    rows = (region == "north") & (plan == north["key"]["plan"])
    from scipy.special import expit, logit
    assert expit(logit(p[rows]) + north["logit_offset"]).mean() == \
        pytest.approx(y[rows].mean(), abs=1e-9)
    # overall row: the whole data
    assert rep.overall["ece"] == M.ece(y, p, 8, "quantile") and rep.overall["rows"] == y.size


def test_the_worst_segment_is_the_miscalibrated_one_and_small_segments_are_not_used():
    y, p, region, _ = _data()
    rep = segment_report(y, p, region)
    assert rep.worst["label"] == "north" and rep.worst["citl_lower"] > 0.05
    west = next(s for s in rep.table if s["label"] == "west")
    assert not west["eligible"] and west["rows"] < 100
    # make the tiny segment wildly miscalibrated: still never the worst (too small)
    y2 = y.copy()
    y2[region == "west"] = 1
    rep2 = segment_report(y2, p, region)
    assert rep2.worst["label"] == "north"
    assert next(s for s in rep2.table if s["label"] == "west")["citl"] > 0.4
    # ... unless the minimum admits it
    assert segment_report(y2, p, region, min_segment_rows=10).worst["label"] == "west"
    # other criteria: largest ECE / largest |O - E| point estimate among eligible segments
    eligible = [s for s in rep.table if s["eligible"]]
    assert segment_report(y, p, region, worst_by="ece").worst["label"] == \
        max(eligible, key=lambda s: s["ece"])["label"]
    assert segment_report(y, p, region, worst_by="abs_citl").worst["label"] == \
        max(eligible, key=lambda s: abs(s["citl"]))["label"]


def test_equal_predictions_give_wilsons_interval_shifted_by_the_prediction():
    rng = np.random.default_rng(3)
    for n, rate, pred in ((40, 0.3, 0.3), (250, 0.1, 0.2), (120, 0.0, 0.05), (80, 1.0, 0.9)):
        y = (np.arange(n) < round(rate * n)).astype(float)
        rng.shuffle(y)
        for conf in (0.9, 0.95):
            rep = segment_report(y, np.full(n, pred), np.zeros(n), confidence=conf,
                                 min_segment_rows=1)
            lo, hi = M.proportion_interval(y.sum(), n, method="wilson", confidence=conf)
            s = rep.table[0]
            assert s["citl_lower"] == pytest.approx(lo - pred, abs=1e-9)
            assert s["citl_upper"] == pytest.approx(hi - pred, abs=1e-9)


def _coverage(n, delta, reps, seed):
    from scipy.special import expit, logit

    rng = np.random.default_rng(seed)
    hits = 0
    for _ in range(reps):
        p = rng.beta(2, 5, n)
        truth = expit(logit(p) + delta)
        y = (rng.random(n) < truth).astype(float)
        iv = offset_score_interval(y, p, np.ones(n), 1.959963984540054)
        gap = truth.mean() - p.mean()   # the gap the offset model implies for these p
        hits += iv["citl_lower"] <= gap <= iv["citl_upper"]
    return hits / reps


@pytest.mark.parametrize("n, delta", [(40, 0.0), (150, 0.8), (60, -1.0)])
def test_the_interval_covers_the_true_gap_at_about_the_nominal_rate(n, delta):
    # 800 seeded replications: the binomial standard error of a 95 % coverage is 0.008
    cover = _coverage(n, delta, 800, seed=n)
    assert 0.925 <= cover <= 0.975, cover


def test_integer_weights_equal_duplicated_rows():
    y, p, region, plan = _data(1200, seed=4)
    w = np.random.default_rng(5).integers(0, 4, y.size)
    keys = np.column_stack([region, plan])
    a = segment_report(y, p, keys, sample_weight=w, min_segment_rows=60)
    b = segment_report(np.repeat(y, w), np.repeat(p, w), np.repeat(keys, w, axis=0),
                       min_segment_rows=60)
    assert [s["label"] for s in a.table] == [s["label"] for s in b.table]
    for sa, sb in zip(a.table, b.table):
        assert sa["weight"] == sb["rows"] and sa["eligible"] == sb["eligible"]
        for k in ("positives", "mean_prediction", "observed_rate", "citl", "citl_lower",
                  "citl_upper", "logit_offset", "ece", "log_loss", "brier"):
            assert sa[k] == pytest.approx(sb[k], rel=1e-9, abs=1e-12), k
    assert a.worst["label"] == b.worst["label"]
    # fractional weights: everything but the (unweighted) ECE
    frac = segment_report(y, p, region, sample_weight=w + 0.5)
    assert all(math.isnan(s["ece"]) for s in frac.table)
    assert all(math.isfinite(s["citl_upper"]) for s in frac.table)


def test_simultaneous_intervals_are_bonferroni_over_the_eligible_segments():
    y, p, region, _ = _data()
    rep = segment_report(y, p, region, simultaneous=True, confidence=0.9)
    assert rep.settings["n_eligible"] == 3
    assert rep.settings["interval_confidence"] == pytest.approx(1 - 0.1 / 3)
    plain = segment_report(y, p, region, confidence=1 - 0.1 / 3)
    for a, b in zip(rep.table, plain.table):
        assert (a["citl_lower"], a["citl_upper"]) == (b["citl_lower"], b["citl_upper"])


def test_multiclass_is_reported_top_label():
    rng = np.random.default_rng(7)
    n = 900
    logits = rng.normal(size=(n, 3)) * 2
    P = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = np.array([rng.choice(3, p=row) for row in P])
    seg = rng.choice(["a", "b"], n)
    rep = segment_report(y, P, seg, n_bins=15)
    assert rep.settings["multiclass"]
    for s in rep.table:
        rows = seg == s["label"]
        top = P[rows].argmax(1)
        assert s["ece"] == top_label_ece(y[rows], P[rows], 15)
        assert s["observed_rate"] == pytest.approx(np.mean(top == y[rows]))
        assert s["mean_prediction"] == pytest.approx(P[rows].max(1).mean())
        assert s["log_loss"] == pytest.approx(multiclass_log_loss(y[rows], P[rows]))
        assert s["brier"] == pytest.approx(multiclass_brier(y[rows], P[rows]))


def test_named_errors():
    y, p, region, _ = _data(500)
    with pytest.raises(SegmentLengthError, match="500 probabilities but 499 segment rows"):
        segment_report(y, p, region[:-1])
    with pytest.raises(SegmentLengthError, match="500 probabilities but 499 labels"):
        segment_report(y[:-1], p, region)
    with pytest.raises(SegmentLengthError, match="weights"):
        segment_report(y, p, region, sample_weight=np.ones(3))
    bad = p.copy()
    bad[[3, 9]] = np.nan
    with pytest.raises(NaNProbabilityError, match="2 row"):
        segment_report(y, bad, region)
    keys = region.astype(object)
    keys[[1, 2, 5]] = None
    with pytest.raises(MissingSegmentKeyError, match="3"):
        segment_report(y, p, keys)
    rep = segment_report(y, p, keys, missing="segment", min_segment_rows=1)
    miss = next(s for s in rep.table if s["key"]["segment"] is None)
    assert miss["rows"] == 3 and miss["label"] == "<missing>"
    with pytest.raises(NoEligibleSegmentError, match="min_segment_rows=1000"):
        segment_report(y, p, region, min_segment_rows=1000)
    with pytest.raises(ValueError, match="labels 0 and 1"):
        segment_report(y + 1, p, region)
    with pytest.raises(ValueError, match="worst_by"):
        segment_report(y, p, region, worst_by="biggest")


def test_report_object_forms():
    y, p, region, plan = _data(800)
    rep = segment_report(y, p, pd.Series(region, name="region"), min_segment_rows=50)
    assert isinstance(rep, SegmentReport)
    d = rep.to_dict()
    text = json.dumps(d, allow_nan=False)        # strict JSON: infinite offsets become null
    assert json.loads(text)["worst"]["label"] == rep.worst["label"]
    frame = rep.to_frame()
    assert list(frame["region"]) == [s["label"] for s in rep.table]
    assert "citl_lower" in frame.columns and len(frame) == len(rep.table)
    assert "worst" in repr(rep) and rep.worst["label"] in repr(rep)
    assert rep.format().count("\n") == len(rep.table) + 1


def test_a_key_column_named_like_a_statistic_is_kept():
    y, p, region, _ = _data(600)
    frame = segment_report(y, p, pd.DataFrame({"rows": region}), min_segment_rows=10).to_frame()
    assert list(frame["segment.rows"]) == sorted(set(region))
    assert frame["rows"].sum() == 600
