"""Deterministic elementary functions: accuracy against mpmath (100 bits) and scipy, C99 special
values, and bit-identical results under a different CPU feature set in a subprocess."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import numpy as np
import pytest

from mlcal._solvers import detmath as dm

mpmath = pytest.importorskip("mpmath")
mpmath.mp.prec = 100

N_RANDOM = 20_000
TINY = 5e-324


def _exact(value) -> Fraction:
    """Exact rational value of an mpmath number (finite)."""
    sign, man, exp, _ = mpmath.mpf(value)._mpf_
    return (-1) ** sign * Fraction(man) * Fraction(2) ** exp


def _ulp_errors(fn, xs, ref):
    """Error of ``fn(x)`` in ulps of the correctly rounded reference, for each x."""
    out = np.empty(len(xs))
    for i, x in enumerate(xs):
        got = fn(float(x))
        exact = _exact(ref(mpmath.mpf(float(x))))
        try:
            rounded = float(exact)  # Fraction -> float is correctly rounded, subnormals included
        except OverflowError:
            rounded = math.copysign(math.inf, exact)
        if math.isinf(rounded):
            out[i] = 0.0 if got == rounded else math.inf
            continue
        unit = math.ulp(rounded) if rounded != 0.0 else TINY
        if not math.isfinite(got):
            out[i] = math.inf
            continue
        out[i] = float(abs(Fraction(got) - exact) / Fraction(unit))
    return out


def _log_uniform(rng, lo_exp, hi_exp, n):
    return 10.0 ** rng.uniform(lo_exp, hi_exp, n)


def _inputs(name: str, seed: int = 12) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q = N_RANDOM // 4
    if name == "exp":
        parts = [rng.uniform(-745.1, 709.78, q), rng.uniform(-2, 2, q),
                 rng.uniform(-745.13, -708.4, q // 2),  # subnormal results
                 rng.uniform(700, 709.78, q // 2), rng.uniform(-1e-9, 1e-9, q)]
    elif name == "log":
        parts = [_log_uniform(rng, -323, 308, 2 * q), 1 + rng.uniform(-0.02, 0.02, q),
                 rng.uniform(0.5, 2.0, q)]
    elif name == "log1p":
        parts = [_log_uniform(rng, -30, 300, q), -_log_uniform(rng, -30, -1e-12, q),
                 rng.uniform(-1e-3, 1e-3, q), rng.uniform(-0.999, 3, q)]
    elif name == "expm1":
        parts = [rng.uniform(-40, 709.78, q), rng.uniform(-0.3, 0.3, q),
                 rng.uniform(-1e-6, 1e-6, q), rng.uniform(-5, 5, q)]
    elif name == "expit":
        parts = [rng.uniform(-50, 50, 2 * q), rng.uniform(-1, 1, q), rng.uniform(-745, 745, q)]
    elif name == "lgamma":
        parts = [_log_uniform(rng, -300, 15, 2 * q), rng.uniform(0, 10, q),
                 1 + rng.uniform(-1e-3, 1e-3, q // 2), 2 + rng.uniform(-1e-3, 1e-3, q // 2)]
    else:
        raise KeyError(name)
    return np.concatenate(parts)


def _expit_ref(x):
    return 1 / (1 + mpmath.exp(-x))


CASES = {
    "exp": (dm.det_exp, mpmath.exp),
    "log": (dm.det_log, mpmath.log),
    "log1p": (dm.det_log1p, mpmath.log1p),
    "expm1": (dm.det_expm1, mpmath.expm1),
    "expit": (dm.det_expit, _expit_ref),
}

EDGES = {
    "exp": [0.0, -0.0, TINY, -TINY, 1.0, -1.0, 709.782712893384, np.nextafter(709.782712893384, 0),
            -745.1332191019411, -745.1332191019412, -708.4, -708.3964185322641, 1e-300,
            0.5 * math.log(2)],
    "log": [TINY, 2 * TINY, 2.2250738585072014e-308, np.nextafter(1.0, 0), np.nextafter(1.0, 2),
            1.7976931348623157e308, 2.0, 0.5, math.e, 10.0],
    "log1p": [TINY, -TINY, 1e-300, 2.0**-54, 2.0**-53, 1.5e-16, -0.5, np.nextafter(-1.0, 0),
              1.7976931348623157e308, 2.0**-12, -(2.0**-12), 1.0],
    "expm1": [TINY, -TINY, 2.0**-54, 0.25, -0.25, np.nextafter(0.25, 1), -37.9, 709.78, 1e-10,
              43.0],
    "expit": [0.0, -0.0, TINY, 1.0, -1.0, 40.0, -40.0, 36.0, -36.0, 745.0, -745.0, 1e-17],
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_within_one_ulp_of_correctly_rounded(name):
    fn, ref = CASES[name]
    xs = np.concatenate([_inputs(name), np.asarray(EDGES[name], dtype=float)])
    errs = _ulp_errors(fn, xs, ref)
    worst = int(np.argmax(errs))
    print(f"\n{name}: n={len(xs)} max error {errs[worst]:.4f} ulp at x={xs[worst]!r}; "
          f"correctly rounded {np.mean(errs <= 0.5):.5f}")
    assert errs[worst] < 1.0, (name, xs[worst], errs[worst])  # the contract
    # what the method delivers (final rounding plus a few hundredths of an ulp)
    assert errs[worst] < 0.55 and np.mean(errs <= 0.5) > 0.99


@pytest.mark.parametrize("name", sorted(CASES) + ["lgamma"])
def test_array_version_matches_scalar_bits(name):
    fn = getattr(dm, f"det_{name}")
    arr_fn = getattr(dm, f"det_{name}_array")
    specials = [np.nan, np.inf, 0.0, -0.0] + ([] if name == "lgamma" else [-np.inf])
    xs = np.concatenate([_inputs(name, seed=3)[:2000], specials])
    got = arr_fn(xs)
    want = np.array([fn(float(x)) for x in xs])
    assert got.dtype == np.float64 and got.shape == xs.shape
    assert got.tobytes() == want.tobytes()


def _same(a: float, b: float) -> bool:
    """Bitwise equality (distinguishes -0 from 0, nan equals nan)."""
    return np.float64(a).tobytes() == np.float64(b).tobytes() or (math.isnan(a) and math.isnan(b))


# C99 Annex F special values
SPECIALS = [
    (dm.det_exp, math.nan, math.nan),
    (dm.det_exp, math.inf, math.inf),
    (dm.det_exp, -math.inf, 0.0),
    (dm.det_exp, 0.0, 1.0),
    (dm.det_exp, -0.0, 1.0),
    (dm.det_exp, 710.0, math.inf),
    (dm.det_exp, 1e308, math.inf),
    (dm.det_exp, -746.0, 0.0),
    (dm.det_exp, -1e308, 0.0),
    # C99 thresholds: last finite / first overflowing, last non-zero / first zero result
    (dm.det_exp, 709.782712893384, 1.7976931348622732e308),
    (dm.det_exp, float(np.nextafter(709.782712893384, 800)), math.inf),
    (dm.det_exp, -745.1332191019411, TINY),
    (dm.det_exp, float(np.nextafter(-745.1332191019411, -800)), 0.0),
    (dm.det_exp, -708.3964185322641, 2.2250738585072626e-308),  # around the least normal
    (dm.det_log, math.nan, math.nan),
    (dm.det_log, 0.0, -math.inf),
    (dm.det_log, -0.0, -math.inf),
    (dm.det_log, -1.0, math.nan),
    (dm.det_log, -math.inf, math.nan),
    (dm.det_log, math.inf, math.inf),
    (dm.det_log, 1.0, 0.0),
    (dm.det_log1p, math.nan, math.nan),
    (dm.det_log1p, 0.0, 0.0),
    (dm.det_log1p, -0.0, -0.0),
    (dm.det_log1p, -1.0, -math.inf),
    (dm.det_log1p, -2.0, math.nan),
    (dm.det_log1p, math.inf, math.inf),
    (dm.det_log1p, -math.inf, math.nan),
    (dm.det_log1p, TINY, TINY),
    (dm.det_log1p, -TINY, -TINY),
    (dm.det_expm1, math.nan, math.nan),
    (dm.det_expm1, 0.0, 0.0),
    (dm.det_expm1, -0.0, -0.0),
    (dm.det_expm1, math.inf, math.inf),
    (dm.det_expm1, -math.inf, -1.0),
    (dm.det_expm1, 710.0, math.inf),
    (dm.det_expm1, -800.0, -1.0),
    (dm.det_expm1, -TINY, -TINY),
    (dm.det_expm1, float(np.nextafter(709.782712893384, 800)), math.inf),
    (dm.det_expit, math.nan, math.nan),
    (dm.det_expit, math.inf, 1.0),
    (dm.det_expit, -math.inf, 0.0),
    (dm.det_expit, 0.0, 0.5),
    (dm.det_expit, -0.0, 0.5),
    (dm.det_lgamma, math.nan, math.nan),
    (dm.det_lgamma, math.inf, math.inf),
    (dm.det_lgamma, 0.0, math.inf),
    (dm.det_lgamma, -0.0, math.inf),
    (dm.det_lgamma, 1e306, math.inf),
]


@pytest.mark.parametrize("fn,x,want", SPECIALS)
def test_special_values(fn, x, want):
    assert _same(fn(x), want), (fn, x, fn(x))


def test_expit_symmetry_and_tails():
    half = np.linspace(0.0, 60.0, 2401)
    xs = np.concatenate([-half[::-1], half])
    got = dm.det_expit_array(xs)
    # expit(-x) = 1 - expit(x) holds exactly in the reference; both computed results are
    # within 1 ulp, so their sum is within a few ulp of 1
    assert np.all(np.abs(got + got[::-1] - 1.0) <= 4 * np.finfo(float).eps)
    assert np.all(np.diff(got) >= 0)
    # deep negative tail stays positive (no 1/(1+inf) underflow to 0 before the true value does)
    assert dm.det_expit(-700.0) > 0 and dm.det_expit(-745.0) == TINY


@pytest.mark.parametrize("ref_name", ["mpmath", "scipy"])
def test_lgamma_accuracy(ref_name):
    xs = np.concatenate([_inputs("lgamma"), [TINY, 1e-300, 0.5, 1.0, 2.0, 3.0, 8.0, 1e15, 1e300]])
    got = dm.det_lgamma_array(xs)
    if ref_name == "mpmath":
        ref = np.array([float(mpmath.loggamma(mpmath.mpf(float(x)))) for x in xs])
    else:
        special = pytest.importorskip("scipy.special")
        xs = xs[xs >= 1e-300]  # scipy returns inf for subnormal x (log(1/x) overflows there)
        got = dm.det_lgamma_array(xs)
        ref = special.gammaln(xs)
    bound = 1e-14 * np.maximum(1.0, np.abs(ref))
    err = np.abs(got - ref)
    worst = int(np.argmax(err / bound))
    print(f"\nlgamma vs {ref_name}: n={len(xs)} max error/bound {err[worst] / bound[worst]:.3f} "
          f"at x={xs[worst]!r}; max abs error on [0.5, 8]: "
          f"{err[(xs >= 0.5) & (xs <= 8)].max():.3e}")
    assert np.all(err <= bound), (xs[worst], got[worst], ref[worst])


def test_lgamma_rejects_negative():
    with pytest.raises(ValueError, match="x must be >= 0"):
        dm.det_lgamma(-0.5)
    with pytest.raises(ValueError, match="x must be >= 0"):
        dm.det_lgamma_array(np.array([1.0, -3.0]))


# ---------------------------------------------------------------- determinism across CPU features

_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, math, sys
    import numpy as np
    sys.path.insert(0, {root!r})
    from mlcal._solvers import detmath as dm

    def inputs():
        rng = np.random.default_rng(2024)
        # positive doubles of every binade (subnormals included) straight from bits: numpy's
        # power/exp would themselves differ between the two runs
        bits = (rng.integers(0, 2047, 4000, dtype=np.uint64) << np.uint64(52)) | rng.integers(
            0, 2**52, 4000, dtype=np.uint64)
        return np.concatenate([
            rng.uniform(-750, 712, 4000), rng.uniform(-3, 3, 4000), bits.view(np.float64),
            rng.uniform(-0.3, 0.3, 2000), rng.uniform(-1.0, 0.0, 2000),
            [0.0, -0.0, 5e-324, -5e-324, np.inf, -np.inf, np.nan, 709.782712893384,
             -745.1332191019411],
        ])

    def sha(a):
        return hashlib.sha1(np.ascontiguousarray(a, dtype=np.float64).tobytes()).hexdigest()

    x = inputs()
    pos = np.abs(x[np.isfinite(x) & (x != 0)])
    out = {{name: sha(getattr(dm, "det_" + name + "_array")(x))
           for name in ("exp", "log", "log1p", "expm1", "expit")}}
    out["lgamma"] = sha(dm.det_lgamma_array(pos))
    # what the fix replaces (informational: depends on the machine)
    with np.errstate(all="ignore"):
        out["numpy_exp"] = sha(np.exp(x))
        out["numpy_log"] = sha(np.log(pos))
        out["numpy_expm1"] = sha(np.expm1(x))
    out["math_exp"] = sha([math.exp(v) for v in x[(x > -745) & (x < 709)]])
    out["math_lgamma"] = sha([math.lgamma(v) for v in pos[pos < 1e300]])
    # no fused multiply-add may appear in the compiled kernels (only in runs that compiled
    # afresh: numba cannot show the assembly of cached code)
    import re
    asm = ""
    if {inspect}:
        for name in ("exp", "log", "log1p", "expm1", "expit", "lgamma"):
            asm += "".join(getattr(dm, "det_" + name + "_array").inspect_asm().values())
    out["fma_instructions"] = len(re.findall(r"\\bv?fn?m(add|sub)\\d", asm))
    out["asm_chars"] = len(asm)
    import numba
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as feats
    except ImportError:
        from numpy.core._multiarray_umath import __cpu_features__ as feats
    out["numba_cpu"] = numba.config.CPU_NAME or ""
    out["numpy_x86_v4"] = bool(feats.get("X86_V4"))
    print(json.dumps(out))
    """
)

_DISABLED_ENV = {
    "NUMBA_CPU_NAME": "x86-64",
    "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA,-AVX,-AVX512F",
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL",
}


def _run(script: str, extra_env: dict[str, str]) -> dict:
    env = dict(os.environ)
    for key in ("NUMBA_CPU_NAME", "GLIBC_TUNABLES", "NPY_DISABLE_CPU_FEATURES"):
        env.pop(key, None)
    env.update(extra_env)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="glibc tunables and x86-64 CPU names")
def test_bit_identical_under_reduced_cpu_features(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(dm.__file__))))
    script = _SCRIPT.format(root=root, inspect=True)
    reduced = _run(script, {**_DISABLED_ENV, "NUMBA_CACHE_DIR": str(tmp_path / "cache_reduced")})
    host = _run(script, {"NUMBA_CACHE_DIR": str(tmp_path / "cache_host")})
    # the reduced run really ran with a generic numba target and without numpy's AVX-512 kernels
    assert reduced["numba_cpu"] == "x86-64"
    assert reduced["numpy_x86_v4"] is False
    # the host run compiled for this CPU (which may have FMA) and still used none
    assert host["asm_chars"] > 10_000 and host["fma_instructions"] == 0

    # and the in-process (host CPU, shared cache) results agree with both subprocesses
    ns: dict = {}
    local_script = _SCRIPT.format(root=root, inspect=False).replace("print(json.dumps(out))", "")
    exec(compile(local_script, "<detmath-script>", "exec"), ns)
    here = ns["out"]
    for name in ("exp", "log", "log1p", "expm1", "expit", "lgamma"):
        assert reduced[name] == host[name] == here[name], name
    print("\nreference implementations, reduced CPU features vs host (informational):")
    for name in ("numpy_exp", "numpy_log", "numpy_expm1", "math_exp", "math_lgamma"):
        print(f"  {name}: {'DIFFERS' if reduced[name] != host[name] else 'same'}")

