"""mlcal.monitor.CalibrationMonitor: the martingale property checked exactly by enumeration,
Ville's bound by simulation, detection and the graded recommendation on clear cases, the JSON
state (bit-exact round trip, hostile documents refused), one-class batches, 0/1 forecasts and
frequency weights."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import binom

from mlcal.monitor import CalibrationMonitor, MonitorStep

CS_ZERO = 160   # index of the offset 0 in the confidence-sequence grid linspace(-4, 4, 321)


def _batch(rng, n, shift=0.0, slope=1.0, intercept=0.0):
    x = rng.normal(-1.0, 1.2, n)
    y = (rng.random(n) < expit(slope * x + intercept + shift)).astype(float)
    return expit(x), y


# ------------------------------------------------------------------ validity


def test_every_e_process_has_expectation_one_under_calibration_exactly():
    """Enumerate every label outcome of a 3-batch stream (6 rows, 64 outcomes) drawn from the
    forecasts themselves: the alarm statistic, both components and the confidence sequence's
    null-0 process are martingales started at 1, so their expectation is exactly 1."""
    batches = [np.array([0.2, 0.7]), np.array([0.4]), np.array([0.1, 0.9, 0.55])]
    p_all = np.concatenate(batches)
    totals = np.zeros(4)
    mass = 0.0
    for labels in itertools.product((0.0, 1.0), repeat=p_all.size):
        y_all = np.asarray(labels)
        prob = float(np.prod(np.where(y_all == 1.0, p_all, 1.0 - p_all)))
        monitor = CalibrationMonitor()
        start = 0
        for p in batches:
            monitor.update(p, y_all[start:start + p.size])
            start += p.size
        values = [monitor.e_value, monitor.e_offset, monitor.e_shape,
                  math.exp(monitor._cs_log_e[CS_ZERO])]
        totals += prob * np.asarray(values)
        mass += prob
    assert mass == pytest.approx(1.0, abs=1e-12)
    np.testing.assert_allclose(totals, 1.0, rtol=0, atol=1e-10)


def test_false_alarm_rate_respects_ville_on_stable_streams():
    n_streams, alpha = 300, 0.05
    alarms = 0
    for seed in range(n_streams):
        rng = np.random.default_rng([7, seed])
        monitor = CalibrationMonitor(alpha=alpha)
        for _ in range(10):
            monitor.update(*_batch(rng, 60))
            if monitor.alarm:
                alarms += 1
                break
    # a rate of at most alpha gives more than this many alarms with probability < 0.001
    assert alarms <= binom.ppf(0.999, n_streams, alpha)


# ------------------------------------------------------------------ detection, recommendation


def test_large_prevalence_shift_is_detected_fast_and_re_offset():
    rng = np.random.default_rng(3)
    monitor = CalibrationMonitor()
    for _ in range(8):
        step = monitor.update(*_batch(rng, 300))
        assert not step.alarm and step.recommendation == "none"
    for _ in range(3):
        step = monitor.update(*_batch(rng, 300, shift=1.2))
    assert monitor.alarm and 9 <= monitor.alarm_batch <= 11
    assert monitor.recommendation == "re-offset"
    assert abs(monitor.change_batch - 9) <= 1
    lo, hi = monitor.offset_interval
    assert lo < 1.2 < hi and lo > 0.5
    assert step.offset_estimate == monitor.offset_estimate


def test_slope_change_asks_for_a_refit():
    rng = np.random.default_rng(4)
    monitor = CalibrationMonitor()
    for _ in range(5):
        monitor.update(*_batch(rng, 300))
    for _ in range(6):
        monitor.update(*_batch(rng, 300, slope=0.3, intercept=-0.6))
    assert monitor.alarm and monitor.alarm_batch >= 6
    assert monitor.recommendation == "re-fit"
    assert monitor.e_shape > monitor.e_offset


def test_confidence_sequence_covers_a_constant_offset_and_excludes_zero():
    rng = np.random.default_rng(5)
    monitor = CalibrationMonitor()
    for _ in range(12):
        step = monitor.update(*_batch(rng, 400, shift=0.6))
        assert step.offset_cs is not None and step.offset_cs[0] <= 0.6 <= step.offset_cs[1]
    assert step.offset_cs[0] > 0.0        # offset 0 (calibrated) rejected
    assert monitor.change_batch == 1       # shifted from the start


# ------------------------------------------------------------------ awkward batches


def test_one_class_batches_and_certain_forecasts_do_not_break_it():
    monitor = CalibrationMonitor()
    monitor.update([0.1, 0.2, 0.3], [0, 0, 0])
    monitor.update([0.9, 0.8], [1, 1])
    step = monitor.update([0.0, 1.0, 0.0], [1, 0, 0])   # certain and contradicted
    assert isinstance(step, MonitorStep)
    assert math.isfinite(step.e_value) and math.isfinite(step.log_loss)
    # forecasts are clipped into [1e-6, 1 - 1e-6]: two contradicted rows cost -log(1e-6) each
    assert step.log_loss == pytest.approx((-2 * math.log(1e-6) - math.log1p(-1e-6)) / 3,
                                          rel=1e-9)   # 1 - 1e-6 is rounded
    json.loads(monitor.to_json())


def test_one_class_window_gives_a_clipped_offset():
    monitor = CalibrationMonitor()
    for _ in range(3):
        monitor.update([0.5] * 50, [0] * 50)
    assert monitor.alarm
    assert monitor.offset_estimate == -4.0      # the MLE is -infinity; the grid edge is reported
    assert monitor.recommendation == "re-offset"


def test_frequency_weights_equal_repeated_rows():
    rng = np.random.default_rng(6)
    weighted, repeated = CalibrationMonitor(), CalibrationMonitor()
    for shift in (0.0, 0.0, 0.8, 0.8, 0.8):
        p, y = _batch(rng, 60, shift=shift)
        w = rng.integers(0, 4, p.size)
        w[0] = 1
        a = weighted.update(p, y, sample_weight=w.astype(float))
        b = repeated.update(np.repeat(p, w), np.repeat(y, w))
        for key in ("e_value", "e_offset", "e_shape", "offset_estimate", "log_loss", "ece",
                    "positive_rate"):
            assert getattr(a, key) == pytest.approx(getattr(b, key), rel=1e-12, abs=1e-12), key
        assert a.alarm == b.alarm and a.change_batch == b.change_batch


@pytest.mark.parametrize("p, y, w, message", [
    ([0.2, 1.3], [0, 1], None, "p must lie in"),
    ([0.2, np.nan], [0, 1], None, "non-finite"),
    ([0.2, 0.3], [0, 2], None, "labels 0 and 1"),
    ([0.2, 0.3], [0], None, "length mismatch"),
    ([0.2, 0.3], [0, 1], [1.0, -1.0], "negative"),
    ([], [], None, "empty"),
])
def test_bad_batches_are_refused_with_a_named_error(p, y, w, message):
    monitor = CalibrationMonitor()
    with pytest.raises(ValueError, match=message):
        monitor.update(p, y, sample_weight=w)
    assert monitor.n_batches == 0


@pytest.mark.parametrize("alpha", [0.0, 0.6, True, "0.05", float("nan")])
def test_bad_alpha_is_refused(alpha):
    with pytest.raises(ValueError, match="alpha"):
        CalibrationMonitor(alpha=alpha)


# ------------------------------------------------------------------ persistence


def _fed_monitor(n_batches=6):
    rng = np.random.default_rng(8)
    monitor = CalibrationMonitor(alpha=0.1)
    for t in range(n_batches):
        monitor.update(*_batch(rng, 80, shift=0.9 if t >= 3 else 0.0))
    return monitor, rng


def test_json_round_trip_is_bit_exact_and_the_restored_monitor_continues_identically():
    monitor, rng = _fed_monitor()
    text = monitor.to_json()
    restored = CalibrationMonitor.from_json(text)
    assert restored.to_json() == text
    assert (restored.alarm, restored.alarm_batch, restored.alpha) == \
        (monitor.alarm, monitor.alarm_batch, monitor.alpha)
    p, y = _batch(rng, 80, shift=0.9)
    assert restored.update(p, y) == monitor.update(p, y)
    assert restored.to_json() == monitor.to_json()


def test_save_is_atomic_and_refuses_to_overwrite(tmp_path):
    monitor, _ = _fed_monitor(3)
    path = tmp_path / "monitor.json"
    monitor.save(path)
    with pytest.raises(FileExistsError):
        monitor.save(path)
    assert CalibrationMonitor.load(path).to_json() == monitor.to_json()
    assert [f.name for f in tmp_path.iterdir()] == ["monitor.json"]


def _mutations():
    def edit(fn):
        def apply(doc):
            fn(doc)
            return json.dumps(doc)
        return apply
    return {
        "unknown field": (edit(lambda d: d.update(extra=1)), "unknown field"),
        "missing field": (edit(lambda d: d.pop("cs_log_e")), "missing field"),
        "wrong format": (edit(lambda d: d.update(format="x")), "format"),
        "future version": (edit(lambda d: d.update(version=2)), "version"),
        "alpha out of range": (edit(lambda d: d.update(alpha=1.5)), "alpha"),
        "boolean alpha": (edit(lambda d: d.update(alpha=True)), "alpha"),
        "short e list": (edit(lambda d: d["log_e_offset"].pop()), "log_e_offset"),
        "string in moments": (edit(lambda d: d["batches"][0]["moments"].__setitem__(0, "1")),
                              "numbers only"),
        "negative weight": (edit(lambda d: d["batches"][0]["bins"][0].__setitem__(
            int(np.argmax(d["batches"][0]["bins"][0])), -1.0)), "bins|add up"),
        "more events than weight": (edit(lambda d: d["batches"][1]["moments"].__setitem__(
            1, 1e6)), "impossible"),
        "alarm beyond the batches": (edit(lambda d: d.update(alarm_batch=99)), "alarm_batch"),
        "hidden alarm": (edit(lambda d: d.update(alarm_batch=None)), "no alarm is recorded"),
        "other eps": (edit(lambda d: d.update(eps=1e-3)), "eps"),
        "bad active_starts": (edit(lambda d: d.update(active_starts=-1)), "active_starts"),
        "not an object": (lambda d: "[1, 2]", "JSON object"),
        "NaN token": (lambda d: json.dumps(d).replace(
            str(d["log_e_shape"][0]), "NaN", 1), "non-finite"),
        "duplicate key": (lambda d: json.dumps(d)[:-1] + ', "alpha": 0.1}', "duplicate"),
        "deep nesting": (lambda d: "[" * 5000 + "]" * 5000, "nested|deep"),
    }


@pytest.mark.parametrize("name", sorted(_mutations()))
def test_hostile_state_documents_are_refused(name):
    monitor, _ = _fed_monitor()
    assert monitor.alarm   # the "hidden alarm" case needs one
    mutate, message = _mutations()[name]
    text = mutate(json.loads(monitor.to_json()))
    with pytest.raises(ValueError, match=message):
        CalibrationMonitor.from_json(text)


def test_step_summary_is_plain_json():
    monitor, rng = _fed_monitor(2)
    step = monitor.update(*_batch(rng, 50))
    doc = json.loads(json.dumps(step.as_dict()))
    assert doc["batch"] == 3 and doc["n_rows"] == 50
    assert set(doc) >= {"ece", "log_loss", "e_value", "offset_estimate", "offset_interval",
                        "offset_cs", "alarm", "change_batch", "recommendation"}


def test_frozen_starts_stop_betting_and_the_state_stays_valid():
    rng = np.random.default_rng(9)
    full, capped = CalibrationMonitor(active_starts=None), CalibrationMonitor(active_starts=2)
    for _ in range(5):
        p, y = _batch(rng, 50)
        full.update(p, y)
        capped.update(p, y)
    # starts 0..2 froze after batches 3..5 in the capped monitor; the two newest still agree
    np.testing.assert_allclose(capped._log_e_offset[-2:], full._log_e_offset[-2:], rtol=1e-12)
    assert capped._log_e_offset[0] != full._log_e_offset[0]
    assert CalibrationMonitor.from_json(capped.to_json()).to_json() == capped.to_json()
    with pytest.raises(ValueError, match="active_starts"):
        CalibrationMonitor(active_starts=0)


def test_all_positive_window_gives_the_upper_grid_edge_with_fractional_weights():
    monitor = CalibrationMonitor()
    for _ in range(3):
        monitor.update([0.3, 0.5, 0.2] * 20, [1] * 60, sample_weight=[0.1, 0.7, 0.3] * 20)
    assert monitor.alarm and monitor.offset_estimate == 4.0
    assert monitor.offset_interval == (-math.inf, math.inf)
