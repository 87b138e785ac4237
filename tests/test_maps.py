import json

import numpy as np
import pytest

from mlcal.maps import LinearMap, MapFormatError, SigmoidMap, StepMap, map_from_dict


def test_step_map_uses_side_right():
    m = StepMap([0.2, 0.5], [0.1, 0.4, 0.9])
    s = np.array([0.0, 0.2, 0.3, 0.5, 0.7, -5.0, 5.0])
    expected = [0.1, 0.4, 0.4, 0.9, 0.9, 0.1, 0.9]  # a score equal to a cut takes the upper bin
    np.testing.assert_array_equal(m(s), expected)


def test_linear_map_is_flat_outside_and_interpolates_inside():
    m = LinearMap([0.0, 0.5, 1.0], [0.2, 0.4, 1.0])
    np.testing.assert_allclose(m([-1.0, 0.0, 0.25, 0.75, 2.0]), [0.2, 0.2, 0.3, 0.7, 1.0],
                               rtol=0, atol=1e-15)


def test_single_knot_linear_map_is_constant():
    assert LinearMap([0.3], [0.6])([-9.0, 0.3, 9.0]).tolist() == [0.6, 0.6, 0.6]


def test_sigmoid_map_follows_platt_sign_convention():
    m = SigmoidMap(-2.0, 0.5)
    s = np.array([-40.0, -1.0, 0.0, 3.0, 800.0])
    np.testing.assert_allclose(m(s), 1.0 / (1.0 + np.exp(-2.0 * s + 0.5)), rtol=1e-15)
    assert np.all((m(s) >= 0) & (m(s) <= 1))


def test_sigmoid_input_transform_is_applied_first():
    m = StepMap([0.5], [0.0, 1.0], input_transform="sigmoid")
    assert m([-0.1, 0.0, 3.0]).tolist() == [0.0, 1.0, 1.0]


@pytest.mark.parametrize("bad", [[np.nan], [np.inf], [[0.1, 0.2], [0.3, 0.4]], []])
def test_maps_reject_bad_scores(bad):
    with pytest.raises(ValueError):
        StepMap([0.5], [0.2, 0.8])(bad)


def random_maps(rng):
    t = np.sort(rng.random(7))
    return [StepMap(t, rng.random(8), domain=(0.0, 1.0)),
            LinearMap(t, rng.random(7), input_transform="sigmoid", domain=(-3.1, 4.2)),
            SigmoidMap(rng.normal(), rng.normal())]


def test_json_round_trip_is_bit_exact():
    rng = np.random.default_rng(1)
    for m in random_maps(rng):
        doc = json.loads(json.dumps(m.to_dict()))
        back = map_from_dict(doc)
        assert back == m and type(back) is type(m)
        s = rng.normal(size=200)
        assert np.array_equal(back(s), m(s))
        assert back.to_dict() == m.to_dict()


def corrupt_cases():
    good_step = StepMap([0.2, 0.5], [0.1, 0.4, 0.9]).to_dict()
    good_lin = LinearMap([0.2, 0.5], [0.1, 0.4]).to_dict()
    cases = {
        "not a dict": [1, 2],
        "unknown type": {**good_step, "type": "spline"},
        "future version": {**good_step, "format_version": 99},
        "missing values": {k: v for k, v in good_step.items() if k != "values"},
        "length mismatch": {**good_step, "values": [0.1, 0.2]},
        "unsorted thresholds": {**good_step, "thresholds": [0.5, 0.2]},
        "duplicate knots": {**good_lin, "knots": [0.2, 0.2]},
        "string values": {**good_step, "values": ["0.1", "0.4", "0.9"]},
        "value above one": {**good_lin, "values": [0.1, 1.5]},
        "nan sigmoid": {**SigmoidMap(1.0, 0.0).to_dict(), "a": float("nan")},
        "bad transform": {**good_step, "input_transform": "exec('rm -rf /')"},
        "bad domain": {**good_step, "domain": [1.0]},
        "code instead of numbers": {**good_step, "thresholds": "__import__('os')"},
    }
    return cases


@pytest.mark.parametrize("name,doc", list(corrupt_cases().items()))
def test_corrupted_documents_are_rejected_with_a_named_error(name, doc):
    with pytest.raises(MapFormatError) as info:
        map_from_dict(doc)
    assert str(info.value)  # message names the problem
    assert isinstance(info.value, ValueError)


def test_non_finite_numbers_in_json_are_rejected():
    doc = json.loads(json.dumps(StepMap([0.5], [0.1, 0.2]).to_dict()).replace("0.5", "NaN"))
    with pytest.raises(MapFormatError, match="non-finite"):
        map_from_dict(doc)


def test_maps_are_immutable():
    m = StepMap([0.5], [0.1, 0.2])
    with pytest.raises(ValueError):
        m.values[0] = 0.9
