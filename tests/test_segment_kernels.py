"""The fused row passes of the segmented solvers (mlcal._solvers.segment_kernels): the same bits
as the numpy formulation they replace (det*_array and np.bincount over temporaries), no FMA in
the compiled code, and the solvers' warm starts reaching the cold starts' optima."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import numpy as np
import pytest

from mlcal._solvers.detmath import det_expit_array
from mlcal._solvers.segment_kernels import loglik_sum, offset_sums, slope_sums
from mlcal.calibrators.segment_shrinkage import (common_slope_fit, logistic_loglik,
                                                 segment_offsets)


def _data(n=20_000, g=13, seed=0):
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, g, n)
    codes[:g] = np.arange(g)
    l = rng.normal(0.0, 3.0, n)
    l[:5] = [0.0, -0.0, 45.0, -45.0, 700.0]          # expit's branches and a saturated row
    y = (rng.random(n) < 0.3).astype(np.float64)
    w = rng.integers(0, 4, n).astype(np.float64) * rng.random(n)
    d = rng.normal(0.0, 1.0, g)
    return l, y, w, codes, d, g


def _bits(x):
    return np.asarray(x, dtype=np.float64).view(np.int64)


@pytest.mark.parametrize("seed", [0, 1])
def test_offset_sums_are_the_bincount_bits(seed):
    l, y, w, codes, d, g = _data(seed=seed)
    p = det_expit_array(np.ascontiguousarray(l + d[codes]))
    want_g = np.bincount(codes, weights=w * (y - p), minlength=g)
    want_h = np.bincount(codes, weights=w * (p * (1.0 - p)), minlength=g)
    got_g, got_h = offset_sums(l, d, codes, w, y, g)
    assert np.array_equal(_bits(got_g), _bits(want_g))
    assert np.array_equal(_bits(got_h), _bits(want_h))


@pytest.mark.parametrize("a", [1.0, 0.73, 1.9])
def test_slope_sums_are_the_bincount_bits(a):
    l, y, w, codes, d, g = _data(seed=2)
    p = det_expit_array(np.ascontiguousarray(a * l + d[codes]))
    r, q = w * (y - p), w * (p * (1.0 - p))
    one = np.zeros(l.size, dtype=np.int64)
    want = (np.bincount(one, weights=r * l, minlength=1)[0],
            np.bincount(codes, weights=r, minlength=g),
            np.bincount(one, weights=q * l * l, minlength=1)[0],
            np.bincount(codes, weights=q * l, minlength=g),
            np.bincount(codes, weights=q, minlength=g))
    got = slope_sums(a, l, d, codes, w, y, g)
    for x, v in zip(got, want):
        assert np.array_equal(_bits(x), _bits(v))


@pytest.mark.parametrize("a", [1.0, 0.73, 1.9])
def test_loglik_sum_is_logistic_loglik_bits(a):
    l, y, w, codes, d, g = _data(seed=3)
    z = a * l + d[codes]
    assert _bits(loglik_sum(a, l, d, codes, w, y)) == _bits(logistic_loglik(z, y, w))
    # and logistic_loglik is what it says (an independent formula, to rounding)
    soft = np.logaddexp(0.0, z)
    assert loglik_sum(a, l, d, codes, w, y) == pytest.approx(float(np.sum(w * (y * z - soft))),
                                                             rel=1e-12)


def test_segment_offsets_warm_start_reaches_the_cold_optimum():
    l, y, w, codes, d, g = _data(seed=4)
    prior = np.zeros(g)
    cold, v_cold = segment_offsets(l, y, w, codes, g, prior)
    for start in (cold + 0.3, cold - 2.0, np.zeros(g), 0.9 * cold):
        warm, v_warm = segment_offsets(l, y, w, codes, g, prior, start=start)
        assert np.max(np.abs(warm - cold)) <= 1e-12
        assert np.max(np.abs(v_warm / v_cold - 1.0)) <= 1e-12
    # the optimum: each segment's score is 0 (brute force on the gradient)
    p = 1.0 / (1.0 + np.exp(-(l + cold[codes])))
    grad = np.bincount(codes, weights=w * (y - p), minlength=g)
    info = np.bincount(codes, weights=w * p * (1 - p), minlength=g)
    assert np.max(np.abs(grad / info)) <= 1e-10
    with pytest.raises(ValueError, match="start must be finite"):
        segment_offsets(l, y, w, codes, g, prior, start=np.full(g, np.nan))


def test_segment_offsets_stops_at_the_root_without_bisecting_away(monkeypatch):
    # a large sample: near the root the gradient's sign is rounding noise; the solver must
    # stop there in a handful of Newton steps, not bisect back from a far bracket end
    import mlcal.calibrators.segment_shrinkage as ss

    l, y, w, codes, d, g = _data(n=400_000, g=40, seed=5)
    calls = []

    def counted(*args):
        calls.append(1)
        return offset_sums(*args)

    monkeypatch.setattr(ss, "offset_sums", counted)
    est, _ = segment_offsets(l, y, w, codes, g, np.zeros(g))
    assert len(calls) <= 12          # Newton from 0: quadratic convergence, plus the last pass
    p = 1.0 / (1.0 + np.exp(-(l + est[codes])))
    info = np.bincount(codes, weights=w * p * (1 - p), minlength=g)
    assert np.max(np.abs(np.bincount(codes, weights=w * (y - p), minlength=g) / info)) <= 1e-10


@pytest.mark.parametrize("centre", [0.0, "vector"])
def test_common_slope_fit_warm_start_reaches_the_cold_optimum(centre):
    l, y, w, codes, d, g = _data(seed=6)
    z = 1.2 * l + d[codes]
    y = (np.random.default_rng(7).random(l.size) < 1.0 / (1.0 + np.exp(-z))).astype(float)
    c = np.linspace(-0.5, 0.5, g) if centre == "vector" else centre
    a, dd = common_slope_fit(l, y, w, codes, g, c, 0.4)
    for start in ((a, dd), (1.0, np.zeros(g)), (0.5, dd + 1.0), (a * 1.01, dd)):
        a2, d2 = common_slope_fit(l, y, w, codes, g, c, 0.4, start=start)
        assert abs(a2 - a) <= 1e-12 * max(1.0, abs(a))
        assert np.max(np.abs(d2 - dd)) <= 1e-11
    with pytest.raises(ValueError, match="start must be finite"):
        common_slope_fit(l, y, w, codes, g, c, 0.4, start=(np.inf, dd))


@pytest.mark.skipif(sys.platform != "linux", reason="x86-64 assembly")
def test_no_fma_in_the_compiled_kernels(tmp_path):
    # compiled afresh in a subprocess (numba cannot show the assembly of cached code), for
    # this CPU (which may have FMA)
    script = (
        "import re, json\n"
        "import numpy as np\n"
        "from mlcal._solvers import segment_kernels as k\n"
        "l = np.linspace(-3, 3, 50); c = np.arange(50) % 3; w = np.ones(50); y = (l > 0) * 1.0\n"
        "d = np.zeros(3)\n"
        "k.offset_sums(l, d, c, w, y, 3); k.slope_sums(1.1, l, d, c, w, y, 3)\n"
        "k.loglik_sum(1.1, l, d, c, w, y)\n"
        "asm = ''.join(''.join(f.inspect_asm().values()) for f in "
        "(k.offset_sums, k.slope_sums, k.loglik_sum))\n"
        "print(json.dumps([len(asm), len(re.findall(r'\\bv?fn?m(add|sub)\\d', asm))]))\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("NUMBA_CPU_NAME", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    chars, fma = map(int, re.findall(r"\d+", proc.stdout.strip().splitlines()[-1]))
    assert chars > 5_000 and fma == 0


def test_segment_slopes_variance_on_separable_segment_does_not_hang_on_the_last_bit():
    """A separable segment has no finite slope estimate: its variance is infinite. Newton stops
    where the weights p (1 - p) have collapsed onto a few rows and the information determinant
    is rounding noise about 0 (these five segments used to get variances of 1e30-1e33, others
    inf, by the sign of that noise); a regular segment's variance is the inverse Fisher
    information's first diagonal entry at the returned estimate."""
    from mlcal.calibrators.segment_shrinkage import segment_slopes

    for seed in (10, 13, 21, 32, 35):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(5, 60))
        l_sep = rng.normal(size=n) * rng.uniform(0.2, 3.0)
        y_sep = (l_sep > np.quantile(l_sep, rng.uniform(0.2, 0.8))).astype(float)
        l_reg = rng.normal(size=400)
        y_reg = (rng.random(400) < 1.0 / (1.0 + np.exp(-0.7 * l_reg - 0.2))).astype(float)
        codes = np.r_[np.zeros(n, dtype=np.int64), np.ones(400, dtype=np.int64)]
        logits = np.r_[l_sep, l_reg]
        a, b, v = segment_slopes(logits, np.r_[y_sep, y_reg], np.ones(n + 400), codes,
                                 np.array([0, 1]), np.zeros(2))
        assert np.isinf(v[0]), (seed, a[0], v[0])
        p = 1.0 / (1.0 + np.exp(-(a[1] * l_reg + b[1])))
        q = p * (1.0 - p)
        info = np.array([[np.sum(q * l_reg ** 2), np.sum(q * l_reg)],
                         [np.sum(q * l_reg), np.sum(q)]])
        assert v[1] == pytest.approx(np.linalg.inv(info)[0, 0], rel=1e-9)
