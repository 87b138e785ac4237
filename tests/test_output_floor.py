"""The output floor: no binary calibrator returns exactly 0 or 1, whatever the scores (issue 26).

The rule (mlcal.calibrators.output_floor): ``floor = 1 / (2 (n + 1))`` with ``n = max(rows of
positive weight, total weight)``; step and linear maps lift values of exactly 0 to
``min(floor, smallest positive value)`` (1 likewise), sigmoid and beta maps clip their output
to ``[floor, 1 - floor]``, recorded as the map's ``floor`` field.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import mlcal
from mlcal.maps import BetaMap, MapFormatError, QuadraticMap, SigmoidMap, map_from_dict
from tests.test_java_evaluator import assert_bits_equal, run_batch

PARAMETRIC = ("platt", "platt-logit", "temperature", "beta", "quadratic")


def forest_scores(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random-forest-like scores: the vote share of 50 trees, so rows score exactly 0.0 or 1.0,
    on well separated classes, and underconfident in between as forests are (a fitted log-odds
    slope above 1 sends the scores 0 and 1 to exactly 0 and 1 without the floor)."""
    rng = np.random.default_rng(seed)
    t = rng.normal(0.0, 5.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-t))).astype(int)
    votes = rng.binomial(50, 1.0 / (1.0 + np.exp(-0.5 * t)))
    return votes / 50.0, y


def expected_floor(w: np.ndarray) -> float:
    return 1.0 / (2.0 * (max(np.count_nonzero(w), float(np.sum(w))) + 1.0))


def test_forest_scores_have_exact_bounds():
    s, y = forest_scores(600, 0)
    assert (s == 0.0).mean() > 0.03 and (s == 1.0).mean() > 0.03


@pytest.mark.parametrize("method", [m for m in mlcal.available_calibrators()])
@pytest.mark.parametrize("seed", [0, 1])
def test_no_method_returns_exactly_zero_or_one_on_forest_scores(method, seed):
    s, y = forest_scores(600, seed)
    s_test, _ = forest_scores(3000, seed + 100)
    x = np.concatenate([s_test, [0.0, 1.0, -5.0, 7.0]])   # the ends, and beyond them
    cal = mlcal.get_calibrator(method).fit(s, y)
    p = cal.predict(x)
    assert p.min() > 0.0 and p.max() < 1.0, (method, cal.map_.kind)
    if method in PARAMETRIC:
        floor = expected_floor(np.ones(600))
        assert p.min() >= floor and p.max() <= 1.0 - floor
    # the JSON round trip reproduces it bit for bit
    again = mlcal.load_calibrator(cal.to_json())
    assert np.array_equal(again.predict(x), p)


@pytest.mark.parametrize("method", ["beta", "platt-logit", "temperature"])
def test_parametric_maps_would_reach_the_bounds_without_the_floor(method):
    # otherwise the test above could not fail for them: the fitted map's own expit rounds to
    # exactly 1 at the score 1.0 (and the floor is recorded on the map)
    s, y = forest_scores(600, 0)
    m = mlcal.get_calibrator(method).fit(s, y).map_
    assert m.floor == expected_floor(np.ones(600))
    raw = BetaMap(m.a, m.b, m.c)(np.array([0.0, 1.0]))
    assert raw[0] == 0.0 or raw[1] == 1.0


def test_isotonic_values_at_the_bounds_are_lifted_and_the_rest_kept(monkeypatch):
    import mlcal.calibrators.base as base

    s, y = forest_scores(600, 0)
    monkeypatch.setattr(base, "data_floor", lambda w: 0.0)
    raw = mlcal.get_calibrator("isotonic").fit(s, y).map_
    assert raw.values[0] == 0.0 and raw.values[-1] == 1.0
    monkeypatch.undo()
    floored = mlcal.get_calibrator("isotonic").fit(s, y).map_
    floor = expected_floor(np.ones(600))
    inner = raw.values[(raw.values > 0.0) & (raw.values < 1.0)]
    lo, hi = min(floor, inner.min()), max(1.0 - floor, inner.max())
    want = np.where(raw.values == 0.0, lo, np.where(raw.values == 1.0, hi, raw.values))
    assert np.array_equal(floored.values, want)
    assert np.array_equal(floored.knots, raw.knots)
    assert np.all(np.diff(floored.values) >= 0.0)   # still non-decreasing


def test_maps_without_bounds_keep_their_json_bytes(monkeypatch):
    # noisy labels everywhere: no bin at 0 or 1, no parametric map beyond the floor
    rng = np.random.default_rng(3)
    s = rng.uniform(0.3, 0.7, 800)
    y = (rng.random(800) < s).astype(int)
    docs = {m: mlcal.get_calibrator(m).fit(s, y).to_json()
            for m in ("histogram", "venn-abers", "sbb", "enir", "spline")}
    import mlcal.calibrators.base as base

    monkeypatch.setattr(base, "data_floor", lambda w: 0.0)
    for m, doc in docs.items():
        assert mlcal.get_calibrator(m).fit(s, y).to_json() == doc, m
        assert '"floor"' not in doc


def test_integer_weights_give_the_floor_of_the_repeated_rows():
    s, y = forest_scores(300, 2)
    w = np.random.default_rng(4).integers(1, 4, 300).astype(float)
    weighted = mlcal.get_calibrator("platt").fit(s, y, sample_weight=w).map_
    repeated = mlcal.get_calibrator("platt").fit(np.repeat(s, w.astype(int)),
                                                 np.repeat(y, w.astype(int))).map_
    assert weighted.floor == repeated.floor == 1.0 / (2.0 * (w.sum() + 1.0))
    # fractional weights never shrink n below the number of rows
    small = mlcal.get_calibrator("platt").fit(s, y, sample_weight=w / 100.0).map_
    assert small.floor == 1.0 / (2.0 * 301.0)


def test_floor_field_round_trip_and_validation():
    m = SigmoidMap(-40.0, 2.0, 0.01)
    d = m.to_dict()
    assert d["floor"] == 0.01
    p = map_from_dict(json.loads(json.dumps(d)))(np.array([-10.0, 0.05, 10.0]))
    assert p[0] == 0.01 and p[2] == 1.0 - 0.01 and 0.01 < p[1] < 0.99
    assert "floor" not in SigmoidMap(-1.0, 0.0).to_dict()
    for bad in (-0.1, 0.5, 2.0):
        with pytest.raises(MapFormatError, match="floor must be a number in"):
            map_from_dict({**d, "floor": bad})
        with pytest.raises(MapFormatError, match="floor must be a number in"):
            BetaMap(1.0, 1.0, 0.0, bad)
    with pytest.raises(MapFormatError, match="'floor' must be a finite number"):
        map_from_dict({**BetaMap(1.0, 1.0, 0.0).to_dict(), "floor": "x"})


def _floored_maps():
    return [SigmoidMap(-30.0, 3.0, 1.0 / 1202.0), SigmoidMap(-2.0, 0.5, 0.125),
            BetaMap(3.0, 2.5, 0.1, 1.0 / 402.0),
            BetaMap(2.0, 1.5, -0.3, 0.004, input_transform="sigmoid"),
            QuadraticMap(1.5, 0.05, 0.2, 1.0 / 402.0),
            QuadraticMap(0.8, -0.01, 0.1, 0.004, on="margin")]


def _probe(m) -> np.ndarray:
    rng = np.random.default_rng(9)
    if m.kind in ("beta", "quadratic") and m.input_transform == "identity" and \
            getattr(m, "on", "logit") == "logit":
        return np.concatenate([[0.0, 1.0, 2.0 ** -40, 0.5], rng.random(300)])
    return np.concatenate([[-50.0, 50.0, 0.0], rng.normal(0.0, 3.0, 300)])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_onnx_export_clips_like_predict(dtype):
    ort = pytest.importorskip("onnxruntime")
    from mlcal.onnx import error_bound, to_onnx

    for m in _floored_maps():
        x = _probe(m).astype(dtype)
        sess = ort.InferenceSession(to_onnx(m, dtype=dtype).SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        got = sess.run(None, {"scores": x})[0].astype(np.float64)
        want = m(x.astype(np.float64))
        assert np.abs(got - want).max() <= error_bound(m, dtype), m
        at_floor = (want == m.floor) | (want == 1.0 - m.floor)
        assert at_floor.any()
        if dtype == "float64":   # the clipped rows are the floor's exact bits
            assert np.array_equal(got[at_floor], want[at_floor])


def test_java_evaluator_clips_bit_for_bit(jar, tmp_path):
    maps = _floored_maps()
    s, y = forest_scores(600, 0)
    fitted = [mlcal.get_calibrator(m).fit(s, y) for m in PARAMETRIC + ("isotonic",)]
    cases = [(m.to_dict(), _probe(m)) for m in maps] + \
        [(c.to_json(), np.concatenate([[0.0, 1.0], s])) for c in fitted]
    expected = [m(x) for m, (_, x) in zip(maps, cases)] + \
        [c.predict(x) for c, (_, x) in zip(fitted, cases[len(maps):])]
    for got, want, i in zip(run_batch(jar, tmp_path, cases), expected, range(len(cases))):
        assert_bits_equal(got, want, f"case {i}")
    bad = {**maps[0].to_dict(), "floor": 0.5}
    out = run_batch(jar, tmp_path, [(bad, np.array([0.1]))])[0]
    assert isinstance(out, str) and "floor must be a number in [0, 0.5)" in out
