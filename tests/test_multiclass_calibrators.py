import json

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax
from sklearn.exceptions import NotFittedError

import mlcal
from mlcal import (MatrixScaling, MissingClassError, NotProbabilitiesError, OneVsRest,
                   TemperatureScaling, TooFewClassesError, VectorScaling)


def _data(n=2000, K=4, seed=0, scale=2.0, true_t=0.5):
    """Logits z; labels drawn from softmax(true_t * z), so the true temperature is 1/true_t."""
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, K)) * scale + rng.normal(size=K)
    p = softmax(true_t * z, axis=1)
    u = rng.uniform(size=(n, 1))
    y = np.minimum((u > np.cumsum(p, axis=1)).sum(axis=1), K - 1)
    w = rng.integers(1, 4, size=n).astype(float)
    return z, y, w


def _nll(logits, y, w):
    """Weighted mean NLL, written independently of mlcal's kernels."""
    return float(np.sum(w * (logsumexp(logits, axis=1) - logits[np.arange(len(y)), y]))
                 / np.sum(w))


def _scipy_optimum(objective, theta0):
    res = minimize(objective, theta0, method="BFGS", options={"gtol": 1e-10, "maxiter": 10000})
    return res.x, res.fun


def test_temperature_scaling_is_optimal_and_recovers_the_true_temperature():
    z, y, w = _data(n=20000, true_t=0.5)
    cal = TemperatureScaling().fit(z, y, sample_weight=w)
    beta, fun = _scipy_optimum(lambda t: _nll(t[0] * z, y, w), np.array([1.0]))
    assert cal.objective_ <= fun + 1e-12
    assert cal.map_.temperature == pytest.approx(1.0 / beta[0], rel=1e-6)
    assert cal.map_.temperature == pytest.approx(2.0, rel=0.05)   # labels drawn at T = 2
    assert cal.objective_ == pytest.approx(_nll(z / cal.map_.temperature, y, w), rel=1e-12)


def test_unpenalised_vector_scaling_is_the_maximum_likelihood_fit():
    # penalty=0: the temperature pre-step only reparametrises d = (1 + v) / T
    z, y, w = _data(K=3, seed=1)
    cal = VectorScaling(penalty=0.0).fit(z, y, sample_weight=w)
    K = 3
    theta, fun = _scipy_optimum(lambda t: _nll(z * t[:K] + t[K:], y, w),
                                np.concatenate([np.ones(K), np.zeros(K)]))
    assert cal.objective_ <= fun + 1e-12
    # the NLL is invariant to adding a constant to all biases: compare the predictions
    np.testing.assert_allclose(cal.predict_proba(z), softmax(z * theta[:K] + theta[K:], axis=1),
                               atol=1e-5)
    np.testing.assert_allclose(cal.map_.weights / cal.map_.temperature, theta[:K], rtol=1e-4)


def test_unpenalised_matrix_scaling_is_the_maximum_likelihood_fit():
    z, y, w = _data(K=4, seed=2)
    K = 4
    cal = MatrixScaling(penalty=0.0, off_diagonal_penalty=0.0).fit(z, y, sample_weight=w)

    def objective(t):
        return _nll(z @ t[:K * K].reshape(K, K).T + t[K * K:], y, w)

    theta, fun = _scipy_optimum(objective, np.concatenate([np.eye(K).ravel(), np.zeros(K)]))
    assert cal.objective_ <= fun + 1e-12
    np.testing.assert_allclose(cal.predict_proba(z), softmax(z @ theta[:K * K].reshape(K, K).T
                                                             + theta[K * K:], axis=1), atol=1e-5)


@pytest.mark.parametrize("make, structured", [(VectorScaling, "StructuredVectorScaling"),
                                              (MatrixScaling, "StructuredMatrixScaling")])
def test_vector_and_matrix_scaling_are_the_structured_fits_without_the_uniform_mixture(
        make, structured):
    z, y, w = _data(n=800, K=4, seed=12)
    plain = make().fit(z, y, sample_weight=w)
    mixed = getattr(mlcal.calibrators.structured_scaling, structured)().fit(z, y,
                                                                            sample_weight=w)
    assert plain.map_.uniform_weight == 0.0 and mixed.map_.uniform_weight > 0.0
    np.testing.assert_array_equal(plain.map_.full_weights(), mixed.map_.full_weights())
    assert plain.objective_ == mixed.objective_


@pytest.mark.parametrize("make", [TemperatureScaling, VectorScaling, MatrixScaling])
def test_probability_input_fits_on_log_probabilities(make):
    z, y, w = _data(K=3, seed=3)
    p = softmax(z, axis=1)
    a = make().fit(p, y, sample_weight=w)
    # probabilities are floored first; without numerical zeros (< 2**-52) the floor is 2**-52
    # and changes no input (test_structured_scaling covers rows with zeros)
    assert a.map_.probability_floor == 2.0 ** -52 and p.min() > 2.0 ** -52
    x = np.log(p)
    b = make(input_kind="logits").fit(x, y, sample_weight=w)
    assert a.map_.input == "log-probabilities" and b.map_.input == "logits"
    # equal up to the rounding of mlcal's log against numpy's, amplified by the fit
    np.testing.assert_allclose(a.predict_proba(p), b.predict_proba(x), atol=1e-6)
    assert np.all(np.abs(a.predict_proba(p).sum(axis=1) - 1.0) <= 1e-12)


@pytest.mark.parametrize("make", [TemperatureScaling, VectorScaling, MatrixScaling,
                                  lambda: OneVsRest("platt")])
def test_fitted_json_does_not_depend_on_row_order(make):
    z, y, w = _data(n=1500, K=3, seed=4)
    perm = np.random.default_rng(5).permutation(len(y))
    a = make().fit(z, y, sample_weight=w)
    b = make().fit(z[perm], y[perm], sample_weight=w[perm])
    assert json.dumps(a.map_.to_dict()) == json.dumps(b.map_.to_dict())


@pytest.mark.parametrize("method", mlcal.available_calibrators())
def test_one_vs_rest_fits_every_binary_method_per_class_and_renormalises(method):
    z, y, _ = _data(n=900, K=3, seed=6)
    p = softmax(z, axis=1)
    cal = OneVsRest(method).fit(p, y)
    q = np.column_stack([mlcal.get_calibrator(method).fit(p[:, k], y == k).predict(p[:, k])
                         for k in range(3)])
    total = q.sum(axis=1, keepdims=True)
    expected = np.where(total > 0, q / np.where(total > 0, total, 1.0), 1.0 / 3)
    out = cal.predict_proba(p)
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-15)
    assert np.all(np.abs(out.sum(axis=1) - 1.0) <= 1e-12)
    assert isinstance(cal.map_, mlcal.MulticlassMap) and len(cal.calibrators_) == 3


def test_one_vs_rest_on_logits_squashes_for_methods_that_need_probabilities():
    z, y, _ = _data(n=900, K=3, seed=7)
    inside = (z - z.min()) / (z.max() - z.min())   # logits that happen to lie in [0, 1]
    cal = OneVsRest(mlcal.BBQ(), input_kind="logits").fit(inside, y)
    assert [m.input_transform for m in cal.map_.maps] == ["sigmoid"] * 3
    with pytest.raises(NotProbabilitiesError):   # "auto" reads them as probabilities
        OneVsRest(mlcal.BBQ()).fit(inside, y)
    assert [m.input_transform for m in OneVsRest("bbq").fit(z, y).map_.maps] == ["sigmoid"] * 3
    assert OneVsRest("platt").fit(z, y).map_.maps[0].input_transform == "identity"


@pytest.mark.parametrize("make", [TemperatureScaling, lambda: OneVsRest("isotonic")])
def test_bad_inputs_raise_named_errors(make):
    z, y, _ = _data(n=300, K=3, seed=8)
    p = softmax(z, axis=1)
    with pytest.raises(TooFewClassesError, match="at least 2 classes"):
        make().fit(p[:, :1], np.zeros(300, dtype=int))
    with pytest.raises(MissingClassError, match=r"class\(es\) \[1\]"):
        make().fit(p, np.where(y == 1, 0, y))
    with pytest.raises(MissingClassError):   # present only with zero weight
        make().fit(p, y, sample_weight=(y != 2).astype(float))
    with pytest.raises(NotProbabilitiesError, match="rows do not sum to 1"):
        make().fit(p * 0.9, y)
    with pytest.raises(NotProbabilitiesError, match="rows do not sum to 1"):
        make().set_params(input_kind="probabilities").fit(p * 0.9, y)
    with pytest.raises(NotProbabilitiesError, match=r"lie in \[0, 1\]"):
        make().set_params(input_kind="probabilities").fit(z, y)
    with pytest.raises(ValueError, match="outside 0..2"):
        make().fit(p, np.where(y == 0, 3, y))
    with pytest.raises(ValueError, match="2-D"):
        make().fit(p[:, 0], y)
    with pytest.raises(ValueError, match="input_kind"):
        make().set_params(input_kind="probs").fit(p, y)
    # the same scores read as logits are fine
    assert make().set_params(input_kind="logits").fit(p * 0.9, y).predict_proba(p).shape == (300, 3)


def test_matrix_scaling_rejects_a_negative_penalty():
    z, y, _ = _data(n=300, K=3)
    with pytest.raises(ValueError, match="off_diagonal_penalty"):
        MatrixScaling(off_diagonal_penalty=-1.0).fit(z, y)


_SERIALISED = [lambda: OneVsRest("isotonic"), lambda: OneVsRest(mlcal.get_calibrator("platt")),
               lambda: OneVsRest("histogram", input_kind="logits"), TemperatureScaling,
               VectorScaling, lambda: MatrixScaling(off_diagonal_penalty=0.5)]


@pytest.mark.parametrize("make", _SERIALISED)
def test_multiclass_calibrator_json_round_trip_is_bit_exact(make, tmp_path):
    z, y, w = _data(n=1500, K=3, seed=4)
    cal = make().fit(z, y, sample_weight=w)
    text = cal.to_json()
    path = tmp_path / "cal.json"
    mlcal.save_calibrator(cal, path)
    for loaded in (mlcal.load_calibrator(text), mlcal.load_calibrator(path),
                   type(cal).from_json(text)):
        assert type(loaded) is type(cal)
        assert loaded.get_params(deep=False).keys() == cal.get_params(deep=False).keys()
        assert loaded.to_json() == text
        probe = np.vstack([z, np.random.default_rng(1).normal(size=(200, 3)) * 5])
        assert np.array_equal(loaded.predict_proba(probe), cal.predict_proba(probe))
    if isinstance(cal, OneVsRest):   # per-class calibrators restored too
        assert [c.map_.to_dict() for c in loaded.calibrators_] == \
               [c.map_.to_dict() for c in cal.calibrators_]
    with pytest.raises(FileExistsError):
        mlcal.save_calibrator(cal, path)


def _probabilities(n=1500, K=3, seed=6):
    z, y, _ = _data(n=n, K=K, seed=seed)
    return softmax(z, axis=1), y


def test_one_vs_rest_auto_keeps_each_class_choice_in_the_document():
    p, y = _probabilities()
    cal = OneVsRest("auto").fit(p, y)
    doc = json.loads(cal.to_json())
    assert [e["fit_info"]["chosen"] for e in doc["class_extras"]] == \
           [c.chosen_ for c in cal.calibrators_]
    back = mlcal.load_calibrator(cal.to_json())
    assert [c.selection_ for c in back.calibrators_] == [c.selection_ for c in cal.calibrators_]
    assert back.to_json() == cal.to_json()


def test_one_vs_rest_venn_abers_keeps_each_class_interval():
    p, y = _probabilities(seed=7)
    cal = OneVsRest("venn-abers").fit(p, y)
    back = mlcal.load_calibrator(cal.to_json())
    for before, after in zip(cal.calibrators_, back.calibrators_):
        lo, hi = before.predict_interval(p[:, 0])
        lo2, hi2 = after.predict_interval(p[:, 0])
        assert np.array_equal(lo, lo2) and np.array_equal(hi, hi2)
    # methods without extra fields write none
    assert "class_extras" not in json.loads(OneVsRest("platt").fit(p, y).to_json())


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(class_extras=d["class_extras"][:2]), "one per class"),
    (lambda d: d.update(class_extras="all"), "one per class"),
    (lambda d: d["class_extras"][1].update(surprise=1), r"class_extras\[1\] has unknown"),
    (lambda d: d["class_extras"][0]["fit_info"].pop("reason"), r"class_extras\[0\].*fit_info"),
    (lambda d: d["class_extras"][2].update(interval={}), r"class_extras\[2\].*interval"),
])
def test_bad_class_extras_are_rejected(edit, message):
    p, y = _probabilities(seed=8)
    doc = json.loads(OneVsRest("auto").fit(p, y).to_json())
    edit(doc)
    with pytest.raises(mlcal.CalibratorFormatError, match=message):
        mlcal.load_calibrator(doc)


def test_softmax_documents_refuse_class_extras():
    z, y, _ = _data(n=800, K=3, seed=5)
    doc = json.loads(TemperatureScaling().fit(z, y).to_json())
    doc["class_extras"] = [{}, {}, {}]
    with pytest.raises(mlcal.CalibratorFormatError, match="no 'class_extras'"):
        mlcal.load_calibrator(doc)


def test_multiclass_documents_are_validated_on_load():
    z, y, _ = _data(n=800, K=3, seed=5)
    doc = json.loads(TemperatureScaling().fit(z, y).to_json())
    ovr = json.loads(OneVsRest("platt").fit(z, y).to_json())
    binary = json.loads(mlcal.get_calibrator("platt").fit(z[:, 0], y == 0).to_json())
    bad = [
        ({**doc, "method": "multiclass-nope"}, "unknown calibrator"),
        ({**doc, "map": ovr["map"]}, "needs a 'softmax-affine' map"),
        ({**doc, "params": {"input_kind": "sometimes"}}, "input_kind"),
        ({**doc, "params": {"temperature": 2}}, "no parameter"),
        ({**ovr, "params": {"calibrator": "nope", "input_kind": "auto"}}, "nope"),
        ({**ovr, "params": {"calibrator": {"method": "platt"}, "input_kind": "auto"}},
         "method name or"),
        ({**ovr, "params": {"calibrator": {"method": "platt", "params": {"c": 1}},
                            "input_kind": "auto"}}, "no parameter"),
    ]
    for document, message in bad:
        with pytest.raises(mlcal.CalibratorFormatError, match=message):
            mlcal.load_calibrator(document)
    with pytest.raises(mlcal.CalibratorFormatError, match="multiclass method"):
        TemperatureScaling.from_dict(binary)
    with pytest.raises(mlcal.CalibratorFormatError, match="not TemperatureScaling"):
        TemperatureScaling.from_dict(ovr)
    with pytest.raises(mlcal.CalibratorFormatError):
        mlcal.get_calibrator("platt").from_dict(doc)   # a binary class refuses it
    with pytest.raises(NotFittedError):
        VectorScaling().to_json()



def _digits_calibration_split(seed):
    """The benchmark's digits split: logistic regression base, ~450 calibration rows on which
    the classes are nearly separable, and ~450 held-out rows."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    X_tr, X_rest, y_tr, y_rest = train_test_split(X, y, train_size=0.5, stratify=y,
                                                  random_state=seed)
    X_cal, X_te, y_cal, y_te = train_test_split(X_rest, y_rest, train_size=0.5,
                                                stratify=y_rest, random_state=seed)
    base = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X_tr, y_tr)
    return base.predict_proba(X_cal), y_cal, base.predict_proba(X_te), y_te


@pytest.mark.parametrize("make", [VectorScaling, MatrixScaling])
def test_vector_and_matrix_scaling_do_not_overfit_nearly_separable_digits(make):
    # issue 26: on this split the former (free-diagonal) matrix scaling stopped at 10000 L-BFGS
    # iterations, and on digits it reached calibration-set log loss 0.098 against 0.778 held
    # out; the penalised fits converge and are not worse than the uncalibrated scores
    p, y, p_te, y_te = _digits_calibration_split(6)
    cal = make(input_kind="probabilities").fit(p, y)
    assert cal.n_iter_ < 100
    ones = np.ones(len(y_te))
    uncalibrated = _nll(np.log(p_te), y_te, ones)
    held_out = _nll(np.log(cal.predict_proba(p_te)), y_te, ones)
    unpenalised = make(input_kind="probabilities", penalty=0.0).fit(p, y)
    assert held_out <= uncalibrated
    with np.errstate(divide="ignore"):   # the unpenalised fit gives some true classes 0
        assert held_out < _nll(np.log(unpenalised.predict_proba(p_te)), y_te, ones)


def _softmax_hessian_reference(z, jac, w):
    """mean_i w_i J_i^T (diag(p_i) - p_i p_i^T) J_i, the Hessian of the weighted mean NLL in
    parameters whose logits have Jacobian ``jac`` (n, K, P)."""
    p = softmax(z, axis=1)
    h_z = np.einsum("ik,kl->ikl", p, np.eye(z.shape[1])) - np.einsum("ik,il->ikl", p, p)
    return np.einsum("i,ikp,ikl,ilq->pq", w, jac, h_z, jac) / np.sum(w)


def test_newton_kernels_return_the_exact_hessian():
    from mlcal._solvers.softmax_derivatives import (matrix_derivatives,
                                                    temperature_derivatives,
                                                    vector_derivatives)
    z, y, w = _data(n=700, K=4, seed=9)
    n, K = z.shape
    rng = np.random.default_rng(10)
    d, b, W = rng.normal(size=K), rng.normal(size=K), rng.normal(size=(K, K))
    # vector scaling: dz_k / dd_k = x_k, dz_k / db_k = 1
    jac = np.concatenate([np.einsum("ik,kl->ikl", z, np.eye(K)),
                          np.broadcast_to(np.eye(K), (n, K, K))], axis=2)
    f, g, H = vector_derivatives(z, y, w, d, b, True)
    assert f == pytest.approx(_nll(z * d + b, y, w), rel=1e-13)
    np.testing.assert_allclose(H, _softmax_hessian_reference(z * d + b, jac, w), rtol=1e-10,
                               atol=1e-14)
    # matrix scaling: dz_k / dW_kj = x_j, dz_k / db_k = 1 (parameters W row-major, then b)
    jac = np.zeros((n, K, K * K + K))
    for k in range(K):
        jac[:, k, k * K:(k + 1) * K] = z
        jac[:, k, K * K + k] = 1.0
    logits = z @ W.T + b
    f, g, H = matrix_derivatives(z, y, w, W, b, True)
    assert f == pytest.approx(_nll(logits, y, w), rel=1e-13)
    np.testing.assert_allclose(H, _softmax_hessian_reference(logits, jac, w), rtol=1e-10,
                               atol=1e-14)
    # temperature: f'' is the Hessian with the Jacobian x
    f, d1, d2 = temperature_derivatives(z, y, w, 0.7)
    assert d2 == pytest.approx(_softmax_hessian_reference(0.7 * z, z[:, :, None], w)[0, 0],
                               rel=1e-10)
    eps = 1e-6   # and f' is the derivative of the independent NLL
    assert d1 == pytest.approx((_nll((0.7 + eps) * z, y, w) - _nll((0.7 - eps) * z, y, w))
                               / (2 * eps), rel=1e-6)


def _fit_in_child(make_name):
    z, y, w = _data(n=3000, K=5, seed=11)
    return {"t": TemperatureScaling, "v": VectorScaling, "m": MatrixScaling}[make_name]() \
        .fit(z, y, sample_weight=w).to_json()


def test_a_process_forked_after_a_fit_can_fit_again():
    # a fit must leave no thread pool behind that breaks fork (GNU OpenMP aborts a forked
    # child that enters a parallel region): multiprocessing's fork start method, prefork servers
    import multiprocessing

    parent = {name: _fit_in_child(name) for name in "tvm"}
    with multiprocessing.get_context("fork").Pool(1) as pool:
        child = {name: pool.apply_async(_fit_in_child, (name,)).get(timeout=300)
                 for name in "tvm"}
    assert child == parent


def test_matrix_documents_written_before_issue_26_still_load():
    # the ODIR fit wrote 'bias_penalty'; the stored map is what loads
    z, y, w = _data(n=600, K=3, seed=13)
    cal = MatrixScaling().fit(z, y, sample_weight=w)
    doc = cal.to_dict()
    doc["params"] = {"off_diagonal_penalty": 0.01, "bias_penalty": 0.01, "input_kind": "auto"}
    back = mlcal.MulticlassCalibrator.from_json(json.dumps(doc))
    assert isinstance(back, MatrixScaling) and back.off_diagonal_penalty == 0.01
    np.testing.assert_array_equal(back.predict_proba(z), cal.predict_proba(z))
