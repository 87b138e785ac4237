"""Work shared or skipped in auto's cross-validation gives the same bits as doing it afresh:
the clamped logs shared by the beta-family candidates, exact group sums that take the in-order
sum when it is exact, the row losses computed once per run of equal predictions, and ELiTE's
fold with all members' crossings in one call."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mlcal._solvers.detmath import det_log1p_array, det_log_array
from mlcal._solvers.linear_fold import _all_crossings, _crossings, fold_clipped_average
from mlcal._solvers.ties import _exact_sum, exact_group_sums
from mlcal.calibrators.auto import _row_log_losses
from mlcal.maps import BETA_EPS
from mlcal.maps.binary import clamped_logs, sharing_clamped_logs


def _direct_logs(s):
    sc = np.clip(s, BETA_EPS, 1.0 - BETA_EPS)
    return det_log_array(sc), det_log1p_array(-sc)


def test_clamped_logs_equal_the_deterministic_logs_inside_and_outside_a_sharing_block():
    rng = np.random.default_rng(0)
    s = np.concatenate((rng.random(500), [0.0, 1.0, -3.0, 7.0, BETA_EPS, 1.0 - BETA_EPS]))
    ref = _direct_logs(s)
    outside = clamped_logs(s)
    with sharing_clamped_logs():
        first = clamped_logs(s)
        again = clamped_logs(s)
    for got in (outside, first, again):
        assert got[0].tobytes() == ref[0].tobytes() and got[1].tobytes() == ref[1].tobytes()
    assert again[0] is first[0] and again[1] is first[1]   # shared within the block
    assert not first[0].flags.writeable and not first[1].flags.writeable


def test_sharing_clamped_logs_recomputes_an_array_changed_in_place_and_forgets_on_exit():
    s = np.linspace(0.1, 0.9, 50)
    with sharing_clamped_logs():
        before = clamped_logs(s)
        s[3] = 0.5
        after = clamped_logs(s)
        assert after[0] is not before[0]
        ref = _direct_logs(s)
        assert after[0].tobytes() == ref[0].tobytes() and after[1].tobytes() == ref[1].tobytes()
        # an equal array that is another object is computed afresh (identity, not contents)
        assert clamped_logs(s.copy())[0] is not after[0]
    assert clamped_logs(s)[0] is not after[0]


def _groups(rng, n):
    starts = np.sort(np.concatenate(([0], rng.integers(0, n, size=int(rng.integers(0, n))))))
    return starts.astype(np.int64)   # repeated starts: empty groups (sum 0.0)


@pytest.mark.parametrize("kind", ["counts", "fractions", "signed zeros", "huge", "tiny", "mixed"])
def test_exact_group_sums_are_the_correctly_rounded_sums(kind):
    rng = np.random.default_rng(len(kind))
    for _ in range(300):
        n = int(rng.integers(1, 40))
        if kind == "counts":
            v = rng.integers(0, 6, n).astype(float)
        elif kind == "fractions":
            v = rng.random(n) * rng.choice([1e-3, 1.0, 1e3], n)
        elif kind == "signed zeros":
            v = rng.choice([0.0, -0.0], n)
        elif kind == "huge":
            v = rng.choice([1e308, -1e308, 1.0, 3.0], n)
        elif kind == "tiny":
            v = rng.choice([5e-324, -5e-324, 1e-310, 0.0], n)
        else:
            v = rng.choice([1.0, 2.0**-53, 2.0**53, -1.0, 0.5, -0.0], n)
        starts = _groups(rng, n)
        got = exact_group_sums(v, starts)
        ends = np.append(starts[1:], n)
        partials = np.empty(64)
        for g, (a, b) in enumerate(zip(starts, ends)):
            ref = v[a] if b - a == 1 else _exact_sum(v, a, b, partials)
            assert got[g].tobytes() == np.float64(ref).tobytes()
            try:
                exact = math.fsum(v[a:b])
            except OverflowError:
                continue
            if math.isfinite(exact) and exact != 0.0:
                assert got[g] == exact


def test_row_log_losses_per_run_equal_the_losses_per_point():
    rng = np.random.default_rng(3)
    steps = np.repeat(np.sort(rng.random(40)), rng.integers(1, 200, 40))   # a step map's output
    for p in (steps, rng.random(1000), np.concatenate((steps, rng.random(30))),
              np.array([0.0, 0.0, 1.0, 1.0, 0.5])):
        q = np.clip(p, 1e-15, 1.0 - 1e-15)
        want = (-det_log_array(q), -det_log_array(1.0 - q))
        got = _row_log_losses(p)
        assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()


def test_all_crossings_concatenate_each_members_crossings():
    rng = np.random.default_rng(4)
    members = []
    for _ in range(30):
        k = int(rng.integers(1, 7))
        members.append((np.unique(rng.random(k)), rng.normal(0.5, 1.0, k)))
    members = [(xk, vk[:xk.size]) for xk, vk in members]
    offsets = np.concatenate(([0], np.cumsum([xk.size for xk, _ in members]))).astype(np.int64)
    xs = np.concatenate([xk for xk, _ in members])
    vs = np.concatenate([vk for _, vk in members])
    want = np.concatenate([_crossings(xk, vk) for xk, vk in members])
    assert _all_crossings(xs, vs, offsets).tobytes() == want.tobytes()
    # and the fold still equals the weighted average of the clipped members at its knots
    w = rng.dirichlet(np.ones(len(members)))
    knots, values = fold_clipped_average(members, w)
    inner = knots[1:-1]
    avg = sum(wt * np.clip(np.interp(inner, xk, vk) if xk.size > 1 else np.full(inner.size, vk[0]),
                           0.0, 1.0)
              for (xk, vk), wt in zip(members, w))
    inside = [(inner >= xk[0]) & (inner <= xk[-1]) for xk, _ in members]
    mask = np.logical_and.reduce(inside)   # where no member extrapolates
    assert np.allclose(values[1:-1][mask], avg[mask], atol=1e-12)


def test_sort_and_collapse_of_sorted_rows_equals_the_sorted_path_and_copies():
    from mlcal._solvers.ties import sort_and_collapse

    rng = np.random.default_rng(6)
    for s in (np.sort(rng.random(500)), np.sort(rng.integers(0, 30, 500) / 7.0),
              np.sort(rng.integers(-3, 3, 200) * 1.0)):   # the last holds zeros: sorted path
        y = (rng.random(s.size) < 0.4).astype(float)
        w = rng.random(s.size) + 0.5
        perm = rng.permutation(s.size)
        got = sort_and_collapse(s, y, w)
        want = sort_and_collapse(s[perm], y[perm], w[perm])   # unsorted: the sort
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
        assert not np.shares_memory(got[0], s) and not np.shares_memory(got[2], w)


def _log_inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    grid = 1.0 + np.arange(129) / 128   # the table's points and their neighbours
    return np.concatenate((rng.random(20000), np.exp(rng.uniform(-745.0, 709.0, 20000)),
                           rng.normal(0.0, 1e3, 2000), grid, np.nextafter(grid, 0.0),
                           np.nextafter(grid, 2.0), grid + 2.0**-53,
                           [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, 2.2250738585072014e-308,
                            2.225073858507201e-308, 1.7976931348623157e308, -1.0]))


def _log1p_inputs() -> np.ndarray:
    rng = np.random.default_rng(8)
    grid = np.arange(-128, 129) / 128
    return np.concatenate((-rng.random(20000), rng.random(2000) * 10.0,
                           np.exp(rng.uniform(-745.0, 709.0, 5000)),
                           -np.exp(rng.uniform(-745.0, 0.0, 5000)), grid,
                           np.nextafter(grid, 2.0), np.nextafter(grid, -2.0), grid + 2.0**-53,
                           [0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, -1.5, 5e-324, -5e-324,
                            2.0**-12, -2.0**-12, np.nextafter(2.0**-12, 0.0),
                            np.nextafter(-2.0**-12, 0.0), np.nextafter(-1.0, 0.0),
                            1.7976931348623157e308]))


@pytest.mark.parametrize("name", ["det_log", "det_log1p"])
def test_log_arrays_equal_the_scalar_function_entry_by_entry(name):
    from numba import njit

    from mlcal._solvers import detmath

    scalar = getattr(detmath, name)
    array = {"det_log": det_log_array, "det_log1p": det_log1p_array}[name]
    x = _log_inputs() if name == "det_log" else _log1p_inputs()

    @njit
    def one_by_one(x):
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = scalar(x[i])
        return out

    assert array(x).tobytes() == one_by_one(x).tobytes()
    assert array(x[::3]).tobytes() == one_by_one(x[::3]).tobytes()   # strided


@pytest.mark.parametrize("floor", [1e-12, 0.0, 1e-300, 2.0**-53, 1e-16, 0.3])
def test_clipped_log_likelihood_equals_the_scalar_logs_sum(floor):
    from mlcal._solvers.detmath import det_log, det_log1p
    from mlcal._solvers.trend_filter import trend_filter_path

    rng = np.random.default_rng(9)
    x = np.sort(rng.random(400))
    w = rng.integers(1, 20, 400).astype(float)
    z = rng.binomial(w.astype(int), np.clip(2.0 * x - 0.5, 0.0, 1.0)) / w   # runs of 0 and 1
    path = trend_filter_path(x, z, w)
    for j in range(path.lambdas.size):
        ll, n_floored = path.clipped_log_likelihood(j, z, w, floor)
        bpi, bpv = path.knot_index[j], path.knot_value[j]
        p = []
        for k in range(x.size):   # the kernel's interpolation, point by point
            if bpi.size == 1:
                p.append(float(bpv[0]))
                continue
            seg = min(int(np.searchsorted(bpi, k, side="right")) - 1, bpi.size - 2)
            a, b = bpi[seg], bpi[seg + 1]
            t = (x[k] - x[a]) / (x[b] - x[a])
            p.append(float(bpv[seg] * (1.0 - t) + bpv[seg + 1] * t))
        p = [min(max(v, floor), 1.0 - floor) for v in p]
        # the same terms, summed in the same order, with the scalar functions
        want = 0.0
        for pk, zk, wk in zip(p, z.tolist(), w.tolist()):
            term = 0.0
            if zk > 0.0:
                term += zk * det_log(pk)
            if zk < 1.0:
                term += (1.0 - zk) * det_log1p(-pk)
            want += wk * term
        assert np.float64(ll).tobytes() == np.float64(want).tobytes()
