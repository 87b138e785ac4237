import json

import numpy as np
import pytest
from scipy.special import softmax

from mlcal.maps import (LinearMap, MapFormatError, MulticlassMap, SigmoidMap, SoftmaxAffineMap,
                        StepMap, map_from_dict)


def _ovr():
    return MulticlassMap((StepMap([0.5], [0.0, 0.8]),
                          LinearMap([0.0, 1.0], [0.1, 0.9], input_transform="sigmoid"),
                          SigmoidMap(-2.0, 0.3)))


def test_ovr_map_normalises_by_the_row_sum():
    rng = np.random.default_rng(0)
    s = rng.normal(size=(50, 3))
    m = _ovr()
    q = np.column_stack([m.maps[k](s[:, k]) for k in range(3)])
    expected = q / q.sum(axis=1, keepdims=True)
    p = m(s)
    np.testing.assert_allclose(p, expected, rtol=1e-15, atol=0)
    assert np.all(np.abs(p.sum(axis=1) - 1.0) <= 1e-12)


def test_ovr_rows_where_every_class_maps_to_zero_get_the_uniform_distribution():
    m = MulticlassMap((StepMap([0.5], [0.0, 1.0]),) * 4)
    s = np.array([[0.1, 0.2, 0.3, 0.4],      # every class maps to 0
                  [0.9, 0.1, 0.1, 0.1],      # only class 0 is non-zero
                  [0.9, 0.9, 0.1, 0.1]])
    p = m(s)
    assert p[0].tolist() == [0.25] * 4
    assert p[1].tolist() == [1.0, 0.0, 0.0, 0.0]
    assert p[2].tolist() == [0.5, 0.5, 0.0, 0.0]


def test_softmax_affine_map_matches_scipy():
    rng = np.random.default_rng(1)
    K = 5
    W, b, T = rng.normal(size=(K, K)), rng.normal(size=K), 1.7
    x = rng.normal(scale=4, size=(200, K))
    m = SoftmaxAffineMap(W, b, T)
    np.testing.assert_allclose(m(x), softmax(x @ W.T / T + b, axis=1), rtol=1e-13, atol=1e-300)
    assert np.all(np.abs(m(x).sum(axis=1) - 1.0) <= 1e-12)
    # a diagonal given as a vector is the same map as the full diagonal matrix
    d = rng.normal(size=K)
    np.testing.assert_array_equal(SoftmaxAffineMap(d, b)(x), SoftmaxAffineMap(np.diag(d), b)(x))


def test_log_probability_input_floors_zero_probabilities():
    p = np.array([[0.7, 0.3, 0.0], [0.2, 0.3, 0.5]])
    m = SoftmaxAffineMap(np.ones(3), np.zeros(3), 2.0, "log-probabilities")
    x = np.log(np.maximum(p, 1e-300))
    np.testing.assert_allclose(m(p), softmax(x / 2.0, axis=1), rtol=1e-13)


@pytest.mark.parametrize("m", [
    _ovr(),
    SoftmaxAffineMap(np.random.default_rng(2).normal(size=(4, 4)),
                     np.random.default_rng(3).normal(size=4), 0.1 + 1 / 3),
    SoftmaxAffineMap(np.array([1 / 3, 2.0, 7e-301]), np.array([0.1, -0.2, 1e300]),
                     input="log-probabilities"),
])
def test_json_round_trip_is_bit_exact(m):
    text = json.dumps(m.to_dict())
    back = map_from_dict(json.loads(text))
    assert type(back) is type(m) and back == m
    assert json.dumps(back.to_dict()) == text
    x = np.random.default_rng(4).uniform(0.01, 1, size=(30, m.n_classes))
    assert m(x).tobytes() == back(x).tobytes()


def _good_softmax():
    return SoftmaxAffineMap(np.eye(3), np.zeros(3)).to_dict()


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(maps=d["maps"][:1]), "at least 2 class maps"),
    (lambda d: d.update(maps="x"), "'maps' must be a list"),
    (lambda d: d["maps"][1].update(values=[0.1, 2.0]), "class map 1"),
    (lambda d: d["maps"].append(_good_softmax()), "must be a binary map"),
    (lambda d: d.update(normalisation="softmax"), "unknown normalisation"),
    (lambda d: d.update(input_transform="sigmoid"), "input_transform must be 'identity'"),
])
def test_corrupted_ovr_documents_are_rejected_with_a_named_error(edit, message):
    doc = _ovr().to_dict()
    edit(doc)
    with pytest.raises(MapFormatError, match=message):
        map_from_dict(doc)


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(temperature=0.0), "temperature must be a finite positive"),
    (lambda d: d.update(temperature=-1), "temperature must be a finite positive"),
    (lambda d: d.update(bias=[0.0]), "at least 2 classes"),
    (lambda d: d.update(weights=[[1.0, 0.0], [0.0, 1.0]]), r"shape \(3,\) or \(3, 3\)"),
    (lambda d: d.update(weights=[[1.0, 0, 0], [0, 1.0], [0, 0, 1.0]]), "differ in length"),
    (lambda d: d.update(weights=[1.0, "a", 1.0]), "list of numbers"),
    (lambda d: d.update(input="probabilities"), "unknown input"),
    (lambda d: d.pop("bias"), "missing field 'bias'"),
    (lambda d: d.update(domain=[0.0, 1.0]), "domain null"),
])
def test_corrupted_softmax_documents_are_rejected_with_a_named_error(edit, message):
    doc = _good_softmax()
    edit(doc)
    with pytest.raises(MapFormatError, match=message):
        map_from_dict(doc)


@pytest.mark.parametrize("bad", [np.zeros((4, 2)), np.zeros(3), [[np.nan, 0.0, 0.0]],
                                 np.zeros((0, 3))])
def test_multiclass_maps_reject_bad_score_matrices(bad):
    for m in (_ovr(), SoftmaxAffineMap(np.eye(3), np.zeros(3))):
        with pytest.raises(ValueError):
            m(bad)
