"""The warm start of the parametric Newton solvers (fit on groups of consecutive rows, then the
full data from that optimum) reaches the cold start's optimum and scipy.optimize's."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit, log_expit

import mlcal
from mlcal._solvers.logistic_newton import fit_logistic
from mlcal._solvers.platt_newton import WARM_POINTS, fit_sigmoid, group_rows


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    f = np.sort(rng.normal(0.3, 1.7, n))
    y = (rng.random(n) < expit(0.8 * f - 0.4 + 0.15 * f * f)).astype(float)
    w = rng.uniform(0.5, 2.0, n)
    return f, y, w


def _close(a, b, rtol):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert np.max(np.abs(a - b)) <= rtol * max(np.max(np.abs(b)), 1.0), (a, b)


def _scipy_logistic(x, t, w, penalty=None):
    """Independent optimum: BFGS on the (scaled) weighted cross-entropy, tight tolerance."""
    xx = np.column_stack((x, np.ones(len(t))))
    sd = np.sqrt(np.average((x - np.average(x, axis=0, weights=w)) ** 2, axis=0, weights=w))
    lam = np.zeros(xx.shape[1]) if penalty is None else np.r_[penalty, 0.0]

    def f(th):
        z = xx @ th
        val = -np.sum(w * (t * log_expit(z) + (1 - t) * log_expit(-z)))
        val += 0.5 * np.sum(lam[:-1] * (th[:-1] * sd) ** 2)
        grad = xx.T @ (w * (expit(z) - t))
        grad[:-1] += lam[:-1] * th[:-1] * sd * sd
        return val / w.sum(), grad / w.sum()

    res = minimize(f, np.zeros(xx.shape[1]), jac=True, method="BFGS",
                   options={"gtol": 1e-13, "maxiter": 10000})
    return res.x


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_warm_sigmoid_fit_equals_cold_fit_and_scipy(seed):
    f, y, w = _data(1500, seed)
    warm = fit_sigmoid(f, y, w, warm_points=100)
    cold = fit_sigmoid(f, y, w, warm_points=None)
    _close(warm[:2], cold[:2], 1e-9)
    ref = _scipy_logistic(f[:, None], y, w)   # Platt's p = 1/(1 + exp(a f + b))
    _close(warm[:2], -ref, 1e-6)


@pytest.mark.parametrize("penalty", [None, [0.0, 3.0]])
@pytest.mark.parametrize("seed", [0, 1])
def test_warm_logistic_fit_equals_cold_fit_and_scipy(seed, penalty):
    f, y, w = _data(1500, seed)
    x = np.column_stack((f, f * f))
    warm = fit_logistic(x, y, w, intercept=True, penalty=penalty, warm_points=100)
    cold = fit_logistic(x, y, w, intercept=True, penalty=penalty, warm_points=None)
    assert warm[3] and cold[3]
    _close(np.r_[warm[0], warm[1]], np.r_[cold[0], cold[1]], 1e-9)
    _close(np.r_[warm[0], warm[1]], _scipy_logistic(x, y, w, penalty), 1e-6)


def test_warm_fit_without_intercept_equals_cold_fit():
    f, y, w = _data(3000, 3)
    warm = fit_logistic(f[:, None], y, w, intercept=False)
    cold = fit_logistic(f[:, None], y, w, intercept=False, warm_points=None)
    _close(warm[0], cold[0], 1e-9)


@pytest.mark.parametrize("n", [1_000, 20_000])
@pytest.mark.parametrize("method", ["platt", "platt-logit", "temperature", "beta", "quadratic"])
def test_large_standalone_fits_reach_the_cold_start_optimum(method, n, monkeypatch):
    """Above WARM_POINTS unique scores every standalone parametric fit starts warm (the
    logistic ones above SMALL_WARM_POINTS too, e.g. auto's fold fits on 2,000 cells); its map
    is the cold start's (the same solvers with ``warm_points=None`` as their default) to 1e-9
    relative to the largest parameter."""
    rng = np.random.default_rng(5)
    s = rng.beta(2.0, 5.0, n)
    y = (rng.random(n) < s ** 0.7).astype(float)
    warm = mlcal.get_calibrator(method).fit(s, y).map_
    monkeypatch.setitem(fit_logistic.__kwdefaults__, "warm_points", None)
    monkeypatch.setitem(fit_sigmoid.__kwdefaults__, "warm_points", None)
    cold = mlcal.get_calibrator(method).fit(s, y).map_
    keys = [k for k in ("a", "b", "c") if hasattr(warm, k)]
    assert keys
    _close([getattr(warm, k) for k in keys], [getattr(cold, k) for k in keys], 1e-9)


def test_groups_are_consecutive_equal_count_and_keep_weight_exactly():
    f, y, w = _data(2003, 4)
    gx, gt, gw = group_rows(f[:, None], y, w, 10)
    bounds = np.arange(11) * 2003 // 10
    for i in range(10):
        sl = slice(bounds[i], bounds[i + 1])
        assert gw[i] == pytest.approx(w[sl].sum(), rel=1e-15)
        assert gx[i, 0] == pytest.approx(np.average(f[sl], weights=w[sl]), rel=1e-12)
        assert gt[i] == pytest.approx(np.average(y[sl], weights=w[sl]), rel=1e-12, abs=1e-15)
    assert np.all(np.diff(gx[:, 0]) > 0)
    assert WARM_POINTS == 2000


def _brute_loss(x, t, w, coef, b0, penalty, sd):
    """The penalised objective evaluated independently (scipy's log_expit, float64)."""
    z = x @ coef + b0
    val = -np.sum(w * (t * log_expit(z) + (1 - t) * log_expit(-z)))
    return val + (0.0 if penalty is None else 0.5 * np.sum(np.asarray(penalty) * (coef * sd) ** 2))


@pytest.mark.parametrize("penalty", [None, [0.0, 3.0]])
@pytest.mark.parametrize("n", [1500, 30000])
def test_fit_without_the_loss_is_the_same_fit(n, penalty):
    """``with_loss=False`` skips the final pass of logarithms when the run ends in full Newton
    steps: the same parameters to the bit, and the loss, when asked for, is the objective at
    the returned point (a brute-force evaluation)."""
    f, y, w = _data(n, 3)
    x = np.column_stack((f, f * f))
    with_loss = fit_logistic(x, y, w, intercept=True, penalty=penalty)
    without = fit_logistic(x, y, w, intercept=True, penalty=penalty, with_loss=False)
    assert with_loss[0].tobytes() == without[0].tobytes()
    assert with_loss[1] == without[1] and with_loss[3] == without[3]
    assert np.isfinite(with_loss[2])
    assert np.isnan(without[2]) or without[2] == with_loss[2]
    sd = np.sqrt(np.average((x - np.average(x, axis=0, weights=w)) ** 2, axis=0, weights=w))
    ref = _brute_loss(x, y, w, with_loss[0], with_loss[1], penalty, sd)
    assert abs(with_loss[2] - ref) <= 1e-10 * abs(ref)


def test_probabilities_pass_equals_the_loss_pass():
    """The exponential-only pass writes the same probabilities and max |z| as the loss pass."""
    from mlcal._solvers.logistic_newton import _loss_probabilities, _probabilities

    rng = np.random.default_rng(5)
    x = np.ascontiguousarray(np.column_stack((rng.normal(0, 20, 5000), rng.normal(size=5000),
                                              np.ones(5000))))
    t, w, theta = rng.random(5000), rng.random(5000), np.array([0.7, -1.3, 0.2])
    p1, p2 = np.empty(5000), np.empty(5000)
    _, zmax1 = _loss_probabilities(x, t, w, theta, p1)
    zmax2 = _probabilities(x, theta, p2)
    assert p1.tobytes() == p2.tobytes() and zmax1 == zmax2


@pytest.mark.parametrize("method", ["beta", "temperature", "platt-logit", "quadratic"])
@pytest.mark.parametrize("case", ["beta-scores", "near-separable", "small"])
def test_last_full_step_needs_no_check(method, case, monkeypatch):
    """A full Newton step from a small gradient whose previous step's contraction predicts the
    next far below tol ends the run without the pass that checks it: the same optimum as
    checking every step (LAST_STEP_FACTOR 0), to 1e-12 of the largest parameter, on 30,000
    rows, on nearly separable labels fitted without Platt's targets (slow convergence) and on
    500 rows (no warm start)."""
    import mlcal._solvers.logistic_newton as ln

    rng = np.random.default_rng(7)
    n = 500 if case == "small" else 30000
    s = rng.beta(2.0, 3.0, n)
    p = expit(40.0 * (s - 0.4)) if case == "near-separable" else s ** 0.7
    y = (rng.random(n) < p).astype(int)
    w = rng.uniform(0.5, 2.0, n)
    params = {"smooth_targets": False} if case == "near-separable" else {}
    fast = mlcal.get_calibrator(method, **params).fit(s, y, w).map_
    monkeypatch.setattr(ln, "LAST_STEP_FACTOR", 0.0)
    checked = mlcal.get_calibrator(method, **params).fit(s, y, w).map_
    a = np.array([fast.a, fast.b, fast.c])
    b = np.array([checked.a, checked.b, checked.c])
    _close(a, b, 1e-12)


@pytest.mark.parametrize("intercept, penalty, cols", [(True, None, 2), (True, [0.0, 3.0], 2),
                                                      (False, None, 1), (True, None, 3)])
@pytest.mark.parametrize("n", [150, 201, 1000, 2000])
def test_small_warm_start_reaches_the_cold_optimum(n, intercept, penalty, cols):
    """Between SMALL_WARM_POINTS and WARM_POINTS rows the logistic fit starts from its fit on
    SMALL_WARM_POINTS groups: the cold start's optimum to 1e-12 of the largest parameter, and
    scipy's to 1e-6."""
    from mlcal._solvers.logistic_newton import SMALL_WARM_POINTS

    f, y, w = _data(n, 11)
    x = np.column_stack((f, f * f, np.sin(f)))[:, :cols]
    warm = fit_logistic(x, y, w, intercept=intercept, penalty=penalty)
    cold = fit_logistic(x, y, w, intercept=intercept, penalty=penalty, warm_points=None)
    assert warm[3] and cold[3]
    _close(np.r_[warm[0], warm[1]], np.r_[cold[0], cold[1]], 1e-12)
    if n <= SMALL_WARM_POINTS:
        assert warm[0].tobytes() == cold[0].tobytes() and warm[1] == cold[1]
    if intercept:
        _close(np.r_[warm[0], warm[1]], _scipy_logistic(x, y, w, penalty), 1e-6)


@pytest.mark.parametrize("method", ["beta", "temperature", "platt-logit", "quadratic"])
@pytest.mark.parametrize("case", ["beta-scores", "weighted", "near-separable", "small"])
def test_skipped_loss_passes_keep_every_bit(method, case, monkeypatch):
    """The full step taken without its line search (SAFE_STEP_Z) and the start's objective
    computed only when its bounds cannot decide the step test (ROUNDING_BOUND_SLACK) change no
    bit: the same maps as with both off (every step with an objective goes to the line search,
    the objective at the start always computed), at 300-100,000 rows."""
    import mlcal._solvers.logistic_newton as ln

    rng = np.random.default_rng(17)
    n = {"small": 300, "weighted": 30000, "near-separable": 20000}.get(case, 100000)
    s = rng.beta(2.0, 5.0, n)
    p = expit(40.0 * (s - 0.3)) if case == "near-separable" else s ** 0.6
    y = (rng.random(n) < p).astype(int)
    w = rng.uniform(0.2, 3.0, n) if case == "weighted" else None
    params = {"smooth_targets": False} if case == "near-separable" else {}
    fast = mlcal.get_calibrator(method, **params).fit(s, y, w).to_json()
    monkeypatch.setattr(ln, "SAFE_STEP_Z", 0.0)
    monkeypatch.setattr(ln, "ROUNDING_BOUND_SLACK", np.nan)
    assert mlcal.get_calibrator(method, **params).fit(s, y, w).to_json() == fast


def test_logistic_fits_keep_every_bit_without_the_skipped_passes(monkeypatch):
    """As above on 60 random weighted logistic problems (1-3 features, penalties, with and
    without intercept, fractional targets)."""
    import mlcal._solvers.logistic_newton as ln

    rng = np.random.default_rng(23)
    problems = []
    for i in range(60):
        n, k = int(rng.choice([50, 400, 3000, 20000])), int(rng.integers(1, 4))
        x = np.sort(rng.normal(size=(n, k)) * rng.choice([0.1, 1.0, 5.0]), axis=0)
        z = x @ (rng.normal(size=k) * rng.choice([0.5, 2.0, 8.0])) + rng.normal()
        t = (rng.random(n) < expit(z)).astype(float)
        t = t * 0.98 + 0.01 if i % 3 == 0 else t
        w = rng.uniform(0.1, 3.0, n) if i % 2 else np.ones(n)
        problems.append((x, t, w, dict(intercept=bool(i % 5), penalty=None if i % 4 else
                                       list(rng.uniform(0.0, 2.0, k)))))
    fast = [fit_logistic(x, t, w, **kw) for x, t, w, kw in problems]
    monkeypatch.setattr(ln, "SAFE_STEP_Z", 0.0)
    monkeypatch.setattr(ln, "ROUNDING_BOUND_SLACK", np.nan)
    for (x, t, w, kw), a in zip(problems, fast):
        b = fit_logistic(x, t, w, **kw)
        assert a[0].tobytes() == b[0].tobytes() and a[1] == b[1] and a[3] == b[3]
        assert a[2] == b[2] or (np.isnan(a[2]) and np.isnan(b[2]))


def test_probabilities_bound_is_above_the_loss():
    """The log-free bound is above the loss (brute force with scipy's log_expit) and writes the
    probabilities and max |z| of the exponential-only pass."""
    from mlcal._solvers.logistic_newton import _loss, _probabilities, _probabilities_bound

    rng = np.random.default_rng(29)
    for scale in (0.01, 1.0, 30.0):
        x = np.ascontiguousarray(np.column_stack((rng.normal(0, scale, 4000),
                                                  rng.normal(size=4000), np.ones(4000))))
        t, w, theta = rng.random(4000), rng.random(4000), rng.normal(size=3)
        p1, p2 = np.empty(4000), np.empty(4000)
        zmax, bound = _probabilities_bound(x, t, w, theta, p1)
        assert _probabilities(x, theta, p2) == zmax and p1.tobytes() == p2.tobytes()
        z = x @ theta
        brute = -np.sum(w * (t * log_expit(z) + (1 - t) * log_expit(-z)))
        assert _loss(x, t, w, theta) <= bound and brute <= bound
    t[0] = 1.5   # no bound for a target outside [0, 1]
    assert np.isnan(_probabilities_bound(x, t, w, theta, p1)[1])


def test_safe_full_step_decreases_the_objective_as_bounded():
    """The premise of SAFE_STEP_Z, checked independently: for a Newton direction ``d`` with
    ``M = max |x_i . d| <= 1``, ``f(theta + d) - f(theta) <= slope (1 - (e^M - 1 - M) / M^2)``
    (below the Armijo line ``1e-4 slope``), at points near and far from the optimum."""
    rng = np.random.default_rng(31)
    checked = 0
    for _ in range(300):
        n = 2000
        x = np.column_stack((rng.normal(size=n), rng.normal(size=n), np.ones(n)))
        t = (rng.random(n) < expit(x @ rng.normal(size=3))).astype(float)
        w = rng.uniform(0.1, 2.0, n)

        def f(th):
            z = x @ th
            return -np.sum(w * (t * log_expit(z) + (1 - t) * log_expit(-z)))

        def newton_direction(th):
            p = expit(x @ th)
            g = x.T @ (w * (p - t))
            h = (x * (w * p * (1 - p))[:, None]).T @ x
            return g, -np.linalg.solve(h, g)

        opt = np.zeros(3)
        for _ in range(30):
            opt = opt + newton_direction(opt)[1]
        theta = opt + rng.normal(size=3) * rng.choice([0.01, 0.05, 0.2, 1.0])
        g, d = newton_direction(theta)
        m = np.max(np.abs(x @ d))
        if not 0.0 < m <= 1.0:
            continue
        slope = g @ d
        drop = f(theta + d) - f(theta)
        assert drop <= slope * (1.0 - (np.expm1(m) - m) / m ** 2) + 1e-9 * abs(f(theta))
        assert drop <= 1e-4 * slope
        checked += 1
    assert checked >= 100


def _standardise_reference(f, w):
    """``standardise`` as first written: ldexp and the weights' products always."""
    import math

    top = float(np.max(np.abs(f)))
    e = math.frexp(top)[1] if 0.0 < top < math.inf else 0
    fs = np.ldexp(f, -e)
    wt = float(np.sum(w))
    m = float(np.sum(w * fs)) / wt
    d = fs - m
    sd = math.sqrt(float(np.sum(w * d * d)) / wt)
    if not sd > 0.0:
        sd = math.ldexp(1.0, -e)
    return d / sd, m / sd, math.ldexp(sd, e)


def test_standardise_keeps_the_bits_of_ldexp_and_the_weight_products():
    """The product with a power of two and the unit-weight sums without products give the bits
    of ldexp and of the weighted sums, from tiny to huge scores, with unit, fractional and
    integer weights, ties and zeros."""
    from mlcal._solvers.platt_newton import standardise

    rng = np.random.default_rng(37)
    for i in range(600):
        n = int(rng.choice([1, 2, 7, 300, 5000]))
        f = rng.normal(size=n) * 10.0 ** rng.uniform(-300, 300)
        if i % 7 == 0:
            f[: n // 2] = 0.0
        w = [np.ones(n), rng.uniform(0.1, 3.0, n), np.round(rng.uniform(0, 3, n)) + 1.0][i % 3]
        a, b = standardise(f, w), _standardise_reference(f, w)
        assert a[0].tobytes() == b[0].tobytes() and (a[1], a[2]) == (b[1], b[2])


@pytest.mark.parametrize("n", [300, 2000, 30000, 100000])
def test_platt_safe_steps_keep_every_bit(n, monkeypatch):
    """Platt's sigmoid solver takes a full step without its line search's objective when no
    row's z moves by more than SAFE_STEP_Z / 2 (a bound from max |g|): the same fit, iteration
    count included, as with the rule off, weighted and unweighted, with smoothed targets and
    without."""
    import mlcal._solvers.platt_newton as pn

    rng = np.random.default_rng(41)
    s = rng.beta(2.0, 5.0, n)
    y = (rng.random(n) < s ** 0.6).astype(float)
    w = rng.uniform(0.2, 3.0, n)
    cases = [(s, y, np.ones(n)), (s, y, w), (s, np.clip(y * 0.98 + 0.01, 0, 1), w)]
    fast = [fit_sigmoid(*c) for c in cases]
    monkeypatch.setattr(pn, "SAFE_STEP_Z", 0.0)
    assert [fit_sigmoid(*c) for c in cases] == fast


@pytest.mark.parametrize("k", [0, 1, 2, 3, 4])
def test_gradient_hessian_are_the_sequential_sums(k):
    """The gradient and Hessian kernel (written out for k = 1-3) returns the sums of the rows'
    terms in row order (NumPy's cumsum: sequential), to the bit, symmetric."""
    from mlcal._solvers.logistic_newton import _gradient_hessian_from

    rng = np.random.default_rng(43 + k)
    n = 3001
    x = np.ascontiguousarray(rng.normal(0, 3, (n, k)))
    t, w, p = rng.random(n), rng.uniform(0.1, 2.0, n), rng.random(n)
    g, h = _gradient_hessian_from(x, t, w, p)
    d1 = w * (p - t)
    d2 = w * p * (1.0 - p)
    for j in range(k):
        assert g[j] == np.cumsum(d1 * x[:, j])[-1]
        for m in range(j + 1):
            assert h[j, m] == np.cumsum(d2 * x[:, j] * x[:, m])[-1] == h[m, j]


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_group_means_are_sequential_sums(k):
    """Each group's weighted mean features are its rows' sequential sums (cumsum) over its
    total weight, to the bit, whatever the number of columns."""
    rng = np.random.default_rng(47 + k)
    n, m = 5003, 40
    x = np.ascontiguousarray(rng.normal(0, 2, (n, k)))
    t, w = rng.random(n), rng.uniform(0.1, 2.0, n)
    gx, gt, gw = group_rows(x, t, w, m)
    bounds = (np.arange(m + 1) * n) // m
    for i in range(m):
        a, b = bounds[i], bounds[i + 1]
        sw = np.cumsum(w[a:b])[-1]
        assert gw[i] == sw
        for j in range(k):
            assert gx[i, j] == np.cumsum(w[a:b] * x[a:b, j])[-1] / sw
