"""Parity of the Java evaluator (``jvm/``) with mlcal's Python ``predict``/``predict_proba``.

The jar is built once per test run with the system JDK (the ``jar`` fixture in conftest.py runs
``jvm/build.sh``: javac + jar, nothing downloaded) and every case is scored by the real JVM; outputs must be bit-identical (float64
bit patterns) to Python's. Without ``javac`` the module is skipped, unless
``MLCAL_REQUIRE_JAVA=1`` (set by ``.ci/run``) makes a missing JDK a failure.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mlcal
from mlcal._solvers import detmath
from mlcal.calibrators.multiclass import (MatrixScaling, OneVsRest, TemperatureScaling,
                                          VectorScaling)
from mlcal.calibrators.structured_scaling import (StructuredMatrixScaling,
                                                  StructuredVectorScaling, TemperatureMixScaling)
from mlcal.maps import (BETA_EPS, BetaMap, LinearMap, MapFormatError, MulticlassMap, QuadraticMap,
                        SigmoidMap, SoftmaxAffineMap, StepMap, map_from_dict)
from tests.support.synthetic import calibration_set

TINY = 5e-324


def java(jar: Path, *args, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run the evaluator's command line; text output captured, not checked."""
    return subprocess.run(["java", "-jar", str(jar), *map(str, args)], input=stdin,
                          capture_output=True, text=True, timeout=600)


def run_batch(jar: Path, tmp: Path, cases: list[tuple[dict | str, np.ndarray]]) -> list:
    """Score every (document, scores) case in one JVM; each result is the float64 output
    array (row-major for multiclass maps) or the error text the evaluator wrote."""
    lines = []
    for i, (doc, scores) in enumerate(cases):
        text = doc if isinstance(doc, str) else json.dumps(doc)
        (tmp / f"c{i}.json").write_text(text, encoding="utf-8")
        np.ascontiguousarray(scores, dtype="<f8").tofile(tmp / f"s{i}.bin")
        lines.append(f"{tmp / f'c{i}.json'}\t{tmp / f's{i}.bin'}\t{tmp / f'o{i}.bin'}")
    (tmp / "jobs.txt").write_text("\n".join(lines) + "\n")
    proc = java(jar, "--batch", tmp / "jobs.txt")
    assert proc.returncode == 0, proc.stderr
    results = []
    for i in range(len(cases)):
        err = tmp / f"o{i}.bin.err"
        results.append(err.read_text() if err.exists()
                       else np.fromfile(tmp / f"o{i}.bin", dtype="<f8"))
    return results


def assert_bits_equal(java, python, what: str) -> None:
    assert not isinstance(java, str), f"{what}: the Java evaluator raised {java}"
    py = np.ascontiguousarray(python, dtype=np.float64).reshape(-1)
    assert java.shape == py.shape, what
    diff = np.flatnonzero(java.view(np.uint64) != py.view(np.uint64))
    assert diff.size == 0, (f"{what}: {diff.size} of {py.size} outputs differ in their bits, "
                            f"first at {diff[0]}: java {java[diff[0]]!r} python {py[diff[0]]!r}")


def probe_scores(m, rng, n_random: int = 3000) -> np.ndarray:
    """Fixed edge inputs (the map's own cut points and their neighbours, the fitted domain
    and beyond, signed zeros, subnormals, huge values) plus random ones."""
    cuts = []
    for name in ("thresholds", "knots"):
        cuts.extend(getattr(m, name, []))
    cuts = np.asarray(cuts, dtype=np.float64)
    fixed = [0.0, -0.0, TINY, -TINY, 1e-310, -1e-310, 2.2250738585072014e-308, 1e-300, 0.5,
             1.0, -1.0, 2.0, 1e-12, 1 - 1e-12, 40.0, -40.0, 745.0, -745.0, 1e300, -1e300,
             np.finfo(float).max, -np.finfo(float).max]
    if m.domain is not None:
        lo, hi = m.domain
        fixed += [lo, hi, lo - 1.0, hi + 1.0, np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)]
    if m.input_transform == "sigmoid":   # the cut points live on the transformed scale
        with np.errstate(divide="ignore", invalid="ignore"):
            cuts = np.log(cuts) - np.log1p(-cuts)
        cuts = cuts[np.isfinite(cuts)]
    return np.concatenate([
        np.asarray(fixed), cuts, np.nextafter(cuts, np.inf), np.nextafter(cuts, -np.inf),
        rng.random(n_random), rng.normal(0.0, 5.0, n_random // 3),
        rng.uniform(-1e6, 1e6, 50)])


def _logit(s):
    s = np.clip(s, 1e-6, 1 - 1e-6)
    return np.log(s) - np.log1p(-s)


def _saturated(n: int, seed: int):
    """Naive-Bayes-like scores (issue #26): log-odds spread over hundreds, so many scores lie
    far below 2^-40 (down to subnormals and exact 0) or round to exactly 1, their order still
    ranking the labels; the fits take the map's clamp from them."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0.0, 250.0, n)
    y = (rng.random(n) < detmath.det_expit_array(z / 60.0)).astype(np.float64)
    s = detmath.det_expit_array(z)
    s[:4] = [0.0, 1.0, 1e-300, 2.0 ** -1022]
    return s, y


DATA_SETS = {
    "uniform": lambda: calibration_set(600, seed=1, link_power=2.0),
    "saturated": lambda: _saturated(500, seed=4),
    "beta-ties": lambda: calibration_set(500, seed=2, beta=(2.0, 5.0), decimals=2),
    "logit-scale": lambda: (lambda s, y: (_logit(s) * 1.7, y))(*calibration_set(500, seed=3)),
}


def test_detmath_tables_are_bit_identical(jar):
    """The Java port computes Tang's tables in decimal at class load as Python does."""
    proc = java(jar, "--print-tables")
    assert proc.returncode == 0, proc.stderr
    got = {line.split()[0]: [int(h, 16) for h in line.split()[1:]]
           for line in proc.stdout.splitlines()}
    expected = {"exp_hi": detmath._EXP_HI, "exp_lo": detmath._EXP_LO,
                "log_hi": detmath._LOG_HI, "log_lo": detmath._LOG_LO,
                "scalars": [detmath._LN2_HI, detmath._LN2_LO, detmath._RED_HI,
                            detmath._RED_LO, detmath._INV_STEP]}
    for name, values in expected.items():
        assert got[name] == np.asarray(values, dtype=np.float64).view(np.uint64).tolist(), name


def _detmath_inputs(name: str) -> np.ndarray:
    rng = np.random.default_rng(3)
    special = [0.0, -0.0, TINY, -TINY, 1e-310, 1.0, -1.0, 2.0 ** -12, -2.0 ** -12, 40.0,
               -40.0, 709.78, 709.79, 709.8, -745.13, -745.2, -744.0, -708.4, -730.0,
               np.inf, -np.inf, np.nan, np.finfo(float).max, np.finfo(float).tiny]
    if name in ("log", "log1p"):
        x = np.concatenate([np.exp(rng.uniform(-740.0, 709.0, 20000)),
                            rng.uniform(-1.0, 1.0, 20000), rng.uniform(0.99, 1.01, 5000),
                            np.ldexp(rng.random(2000), rng.integers(-1074, -1022, 2000))])
    else:
        x = np.concatenate([rng.uniform(-760.0, 715.0, 20000), rng.normal(0.0, 5.0, 20000),
                            rng.uniform(-1e-3, 1e-3, 5000)])
    return np.concatenate([special, x])


@pytest.mark.parametrize("name", ["exp", "log", "log1p", "expit"])
def test_detmath_port_is_bit_identical_over_whole_ranges(jar, tmp_path, name):
    """exp (subnormal and overflowing results included), log (subnormal inputs), log1p and
    expit against mlcal's detmath (beta maps use log and log1p)."""
    x = _detmath_inputs(name)
    x.astype("<f8").tofile(tmp_path / "x.bin")
    proc = java(jar, "--detmath", name, tmp_path / "x.bin", tmp_path / "y.bin")
    assert proc.returncode == 0, proc.stderr
    with np.errstate(all="ignore"):
        expected = getattr(detmath, f"det_{name}_array")(x)
    assert_bits_equal(np.fromfile(tmp_path / "y.bin", dtype="<f8"), expected, name)


def test_every_registered_method_is_bit_identical(jar, tmp_path):
    rng = np.random.default_rng(7)
    cases, expected, names = [], [], []
    for method in mlcal.available_calibrators():
        for data_name, make in DATA_SETS.items():
            s, y = make()
            cal = mlcal.get_calibrator(method).fit(s, y)
            x = probe_scores(cal.map_, rng)
            cases.append((cal.to_json(), x))
            expected.append(cal.predict(x))
            names.append(f"{method}/{data_name} ({cal.map_.kind}, {cal.map_.input_transform})")
    results = run_batch(jar, tmp_path, cases)
    for java, py, name in zip(results, expected, names):
        assert_bits_equal(java, py, name)
    kinds = {n.split("(")[1].split(",")[0] for n in names}
    assert kinds == {"step", "linear", "sigmoid", "beta", "quadratic"}, kinds
    # Venn-Abers documents carry a top-level "interval" block, which prediction ignores
    assert any("interval" in json.loads(doc) for doc, _ in cases)
    assert any("sigmoid)" in n for n in names)   # the input transform was exercised
    # the saturated scores give the beta-family fits a clamp wider than the default
    clamped = {n.split("/")[0] for (doc, _), n in zip(cases, names)
               if "clamp" in json.loads(doc)["map"]}
    assert {"beta", "platt-logit", "temperature", "quadratic"} <= clamped, clamped


def _hand_built_maps() -> dict:
    dom = {"domain": (0.2, 0.8)}
    return {
        "step single bin": StepMap([], [0.3]),
        "step zero threshold": StepMap([-0.0, TINY, 0.5], [0.0, 0.25, 0.5, 1.0], **dom),
        "step subnormal cuts": StepMap([-1e-310, 1e-320, 1e-300], [0.1, 0.2, 0.3, 0.4]),
        "step signed-zero values": StepMap([0.5], [-0.0, 1.0]),
        "step huge cuts": StepMap([-1e308, 1e308], [0.0, 0.5, 1.0]),
        "step sigmoid input": StepMap([0.25, 0.5, 0.75], [0.1, 0.4, 0.6, 0.9],
                                      input_transform="sigmoid"),
        "linear single knot": LinearMap([0.4], [0.7]),
        "linear two knots": LinearMap([0.0, 1.0], [0.1, 0.9], **dom),
        "linear subnormal knots": LinearMap([-1e-300, TINY, 1e-300], [0.0, 0.5, 1.0]),
        # x[j+1] - x[j] overflows: slope 0 and 0 * inf, numpy's other-end fallback
        "linear huge span": LinearMap([-1e308, 1e308], [0.25, 0.75]),
        "linear steep": LinearMap([0.5, 0.5 + 1e-12, 0.6], [0.0, 1.0, 0.3]),
        "linear sigmoid input": LinearMap([0.1, 0.3, 0.9], [0.05, 0.5, 0.95],
                                          input_transform="sigmoid"),
        "sigmoid": SigmoidMap(-3.5, 1.25, **dom),
        "sigmoid saturating": SigmoidMap(-1.0, 0.0),   # subnormal outputs near s = -740
        "sigmoid steep": SigmoidMap(-1e6, 5e5),
        "sigmoid zero slope": SigmoidMap(0.0, -0.3),
        "sigmoid sigmoid input": SigmoidMap(-8.0, 4.0, input_transform="sigmoid"),
        "beta": BetaMap(1.3, 0.7, -0.2, **dom),
        "beta platt-like": BetaMap(2.5, 2.5, 0.4),
        "beta a=0": BetaMap(0.0, 1.7, 0.3),
        "beta b=0": BetaMap(0.9, 0.0, -1.1),
        "beta zero": BetaMap(0.0, 0.0, 0.0),
        "beta steep": BetaMap(400.0, 350.0, 5.0),   # saturates at both clamps
        "beta negative": BetaMap(-2.0, -0.5, 1e-3),
        "beta sigmoid input": BetaMap(0.8, 1.6, 0.1, input_transform="sigmoid"),
        "quadratic": QuadraticMap(1.2, -0.06, -1.1, floor=1e-3, **dom),
        "quadratic convex": QuadraticMap(0.4, 0.3, -2.0),
        "quadratic b=0": QuadraticMap(1.5, 0.0, 0.2),
        "quadratic steep": QuadraticMap(40.0, -3.0, 5.0),
        "quadratic sigmoid input": QuadraticMap(0.9, 0.05, -0.4, input_transform="sigmoid"),
        "quadratic margin": QuadraticMap(1.0, -0.2, 0.3, on="margin", **dom),
        "quadratic margin floor": QuadraticMap(0.7, 0.01, -2.0, floor=0.01, on="margin"),
        # a * z and b * z^2 overflow to opposite infinities: the (z (b z + a)) + c fallback
        "quadratic margin overflow": QuadraticMap(1e300, -1e300, 1.0, on="margin"),
        "quadratic logit overflow": QuadraticMap(1.7e308, -1.7e308, 0.0),
        # a clamp taken from saturated data (issue #26), down to the widest one allowed
        "beta widest clamp": BetaMap(1.3, 0.7, -0.2, clamp=WIDEST_CLAMP),
        "beta clamp 1e-300": BetaMap(0.1, 0.05, 0.3, clamp=(1e-300, 1.0 - 2.0 ** -50)),
        "beta steep wide clamp": BetaMap(400.0, 350.0, 5.0, clamp=(1e-200, 1.0 - 1e-15)),
        "beta clamp low end only": BetaMap(2.5, 2.5, 0.4, clamp=(3e-17, 1.0 - BETA_EPS)),
        "beta clamp sigmoid input": BetaMap(0.8, 1.6, 0.1, input_transform="sigmoid",
                                            clamp=(2.0 ** -900, 1.0 - 2.0 ** -53)),
        "quadratic widest clamp": QuadraticMap(0.1, -0.014, 0.3, clamp=WIDEST_CLAMP),
        "quadratic clamp floor": QuadraticMap(1.2, 0.003, -1.1, floor=1e-3,
                                              clamp=(1e-250, 1.0 - 1e-14)),
        "quadratic clamp overflow": QuadraticMap(1.7e308, -1.7e308, 0.0, clamp=WIDEST_CLAMP),
        "quadratic clamp sigmoid input": QuadraticMap(0.9, 0.05, -0.4, input_transform="sigmoid",
                                                      clamp=(2.0 ** -1000, 1.0 - 2.0 ** -52)),
    }


#: the widest score clamp a map may hold: the smallest normal double and the largest below 1
WIDEST_CLAMP = (2.0 ** -1022, 1.0 - 2.0 ** -53)


# the clamp points of beta maps, their neighbours, and scores either side of them
BETA_PROBES = np.array([0.0, -0.0, TINY, 1e-310, 1e-300, 1e-20, BETA_EPS,
                        np.nextafter(BETA_EPS, 0.0), np.nextafter(BETA_EPS, 1.0), 1 - BETA_EPS,
                        np.nextafter(1 - BETA_EPS, 0.0), np.nextafter(1 - BETA_EPS, 2.0),
                        1 - 2.0 ** -53, 1 - 2.0 ** -52, 1.0, np.nextafter(1.0, 2.0), 2.0,
                        -1.0, 1e300, -1e300, 0.5, 0.25, 0.75, 1e-5, 1 - 1e-5,
                        2.0 ** -1022, np.nextafter(2.0 ** -1022, 0.0),
                        np.nextafter(2.0 ** -1022, 1.0), 1 - 1e-17, 1e-200, 1e-250, 3e-17])


def clamp_probes(m) -> np.ndarray:
    """A map's clamp ends and their neighbours (on the sigmoid scale too, for a map with the
    sigmoid input transform)."""
    ends = np.asarray(getattr(m, "clamp", ()), dtype=np.float64)
    x = np.concatenate([ends, np.nextafter(ends, 0.0), np.nextafter(ends, 1.0)])
    if m.input_transform == "sigmoid":
        with np.errstate(divide="ignore"):
            z = np.log(x) - np.log1p(-x)
        x = np.concatenate([x, z[np.isfinite(z)]])
    return x


def test_hand_built_edge_case_maps_are_bit_identical(jar, tmp_path):
    rng = np.random.default_rng(11)
    maps = _hand_built_maps()
    cases, expected = [], []
    for m in maps.values():
        x = probe_scores(m, rng, n_random=500)
        if isinstance(m, SigmoidMap):
            x = np.concatenate([x, np.linspace(-760.0, 760.0, 3041), [0.5 + 1e-12, 0.5]])
        if isinstance(m, (BetaMap, QuadraticMap)):   # on the sigmoid scale the clamps: +-27.7
            x = np.concatenate([x, BETA_PROBES, clamp_probes(m), np.linspace(-40.0, 40.0, 801),
                                np.exp(np.linspace(-745.0, 0.0, 1500)),
                                np.linspace(-760.0, 760.0, 1521)])
        cases.append((m.to_dict(), x))
        expected.append(m(x))
    for java, py, name in zip(run_batch(jar, tmp_path, cases), expected, maps):
        assert_bits_equal(java, py, name)


def _random_map(rng):
    size = int(rng.integers(1, 300))
    common = {"input_transform": str(rng.choice(["identity", "sigmoid"]))}
    if rng.random() < 0.5:
        common["domain"] = tuple(sorted(rng.normal(0.0, 2.0, 2).tolist()))
    cuts = np.unique(rng.normal(0.5, float(rng.choice([1e-6, 0.3, 10.0])), size))
    values = np.clip(rng.random(cuts.size + 1), 0.0, 1.0)
    kind = rng.choice(["step", "linear", "sigmoid", "beta", "quadratic"])
    if kind == "step":
        return StepMap(cuts, values, **common)
    if kind == "linear":
        return LinearMap(cuts, values[:-1], **common)
    clamp = (2.0 ** -float(rng.uniform(40.0, 1022.0)), 1.0 - 2.0 ** -float(rng.uniform(40.0, 53.0)))
    if kind == "beta":
        if rng.random() < 0.5:
            common["clamp"] = clamp
        return BetaMap(*rng.normal(0.0, 3.0, 3).tolist(), **common)
    if kind == "quadratic":
        on = "margin" if common["input_transform"] == "identity" and rng.random() < 0.5 \
            else "logit"
        if on == "logit" and rng.random() < 0.5:
            common["clamp"] = clamp
        return QuadraticMap(*rng.normal(0.0, 3.0, 3).tolist(), on=on, **common)
    return SigmoidMap(float(rng.normal(0.0, 20.0)), float(rng.normal(0.0, 5.0)), **common)


def test_random_maps_are_bit_identical(jar, tmp_path):
    """Many random maps of every binary kind, sizes and scales, both input transforms."""
    rng = np.random.default_rng(17)
    maps = [_random_map(rng) for _ in range(60)]
    assert any("clamp" in m.to_dict() for m in maps)
    cases = [(m.to_dict(), np.concatenate([probe_scores(m, rng, n_random=300), BETA_PROBES,
                                           clamp_probes(m)])) for m in maps]
    for java_out, (doc, x), m in zip(run_batch(jar, tmp_path, cases), cases, maps):
        assert_bits_equal(java_out, m(x), f"random {doc['type']} map of size {m.size}")


def _multiclass_data(n: int, K: int, seed: int):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, (n, K))
    y = np.argmax(logits * 0.6 + rng.gumbel(size=(n, K)), axis=1)
    y[:K] = np.arange(K)   # every class occurs
    z = np.exp(logits - logits.max(axis=1, keepdims=True))
    return logits, z / z.sum(axis=1, keepdims=True), y


def test_multiclass_maps_are_bit_identical(jar, tmp_path):
    rng = np.random.default_rng(5)
    fitted = []
    for K in (3, 12):   # 12 classes: where numpy's np.sum would switch to pairwise order
        logits, probs, y = _multiclass_data(400, K, seed=K)
        for make in (lambda: OneVsRest("isotonic"), lambda: OneVsRest("platt"),
                     lambda: OneVsRest("histogram"), lambda: OneVsRest("beta"),
                     TemperatureScaling, VectorScaling, MatrixScaling, TemperatureMixScaling,
                     StructuredVectorScaling, StructuredMatrixScaling):
            for scores in (logits, probs):   # fitted calibrators go in as their documents
                fitted.append((f"{make().__class__.__name__} K={K}",
                               make().fit(scores, y), scores))
    # a row whose classes all map to 0 gets the uniform distribution
    zero = StepMap([0.5], [0.0, 1.0])
    fitted.append(("ovr all-zero rows", MulticlassMap((zero, zero, zero)),
                   np.array([[0.1, 0.2, 0.3], [0.6, 0.1, 0.2], [0.9, 0.9, 0.9]])))
    fitted.append(("softmax 130 classes", SoftmaxAffineMap(rng.normal(size=130),
                                                           rng.normal(size=130), 0.7),
                   rng.normal(0.0, 3.0, (50, 130))))
    wide = tuple(StepMap(np.sort(rng.random(5)), rng.random(6)) for _ in range(130))
    fitted.append(("ovr 130 classes", MulticlassMap(wide), rng.random((50, 130))))
    cases, expected, maps = [], [], []
    for _, obj, scores in fitted:
        edge = np.where(rng.random(scores.shape) < 0.1, 0.0, scores)   # floored log-probabilities
        x = np.vstack([scores, edge, rng.permutation(scores)])
        if hasattr(obj, "map_"):
            cases.append((obj.to_json(), x))
            expected.append(obj.predict_proba(x))
            maps.append(obj.map_)
        else:
            cases.append((obj.to_dict(), x))
            expected.append(obj(x))
            maps.append(obj)
    inputs = {m.input for m in maps if isinstance(m, SoftmaxAffineMap)}
    assert inputs == {"logits", "log-probabilities"}
    methods = {json.loads(doc)["method"] for doc, _ in cases if isinstance(doc, str)}
    assert methods == {"multiclass-one-vs-rest", "multiclass-temperature", "multiclass-vector",
                       "multiclass-matrix", "multiclass-ts-mix", "multiclass-svs",
                       "multiclass-sms"}
    # the fitted probability maps carry a measured floor and the structured ones a mixture
    assert any(m.probability_floor > 1e-300 for m in maps if isinstance(m, SoftmaxAffineMap))
    assert any(m.uniform_weight > 0.0 for m in maps if isinstance(m, SoftmaxAffineMap))
    assert any(isinstance(sub, BetaMap) for m in maps if isinstance(m, MulticlassMap)
               for sub in m.maps)
    for java, py, (name, _, _), m in zip(run_batch(jar, tmp_path, cases), expected, fitted, maps):
        assert_bits_equal(java, py, f"{name} ({m.kind})")


#: multiclass auto fits whose choices cover every kind: the softmax-affine methods (each weight
#: shape) and one-vs-rest with a plain, an auto (class_extras with fit_info) and a Venn-Abers
#: (class_extras with interval) inner method
MULTICLASS_AUTO_CANDIDATES = (None, ["temperature"], ["ts-mix"], ["svs"], ["sms"], ["vector"],
                              ["matrix"], ["one-vs-rest:isotonic"],
                              ["one-vs-rest:platt", "one-vs-rest:beta"], ["one-vs-rest:auto"],
                              ["one-vs-rest:venn-abers"])


def test_multiclass_auto_documents_are_bit_identical(jar, tmp_path):
    """Multiclass auto documents (the chosen candidate's map plus fit_info and, for
    one-vs-rest, class_extras) load in the evaluator, which scores them as Python does."""
    import warnings

    from mlcal.calibrators.multiclass_auto import MulticlassAuto

    rng = np.random.default_rng(11)
    logits, probs, y = _multiclass_data(300, 3, seed=21)
    cases, expected, chosen = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for candidates in MULTICLASS_AUTO_CANDIDATES:
            for scores in (logits, probs):
                cal = MulticlassAuto(candidates=candidates).fit(scores, y)
                x = np.vstack([scores, np.where(rng.random(scores.shape) < 0.1, 0.0, scores),
                               rng.permutation(scores)])
                cases.append((cal.to_json(), x))
                expected.append(cal.predict_proba(x))
                chosen.append(cal.chosen_)
    assert {"temperature", "ts-mix", "svs", "sms", "vector", "matrix"} <= set(chosen)
    assert {c for c in chosen if c.startswith("one-vs-rest:")} >= {
        "one-vs-rest:isotonic", "one-vs-rest:auto", "one-vs-rest:venn-abers"}
    # a document written before the CV Brier criterion: no criterion, no cv_brier rows
    old = json.loads(cases[0][0])
    assert all("cv_brier" in r for r in old["fit_info"]["candidates"] if "se" in r)
    del old["params"]["criterion"]
    for row in old["fit_info"]["candidates"]:
        row.pop("cv_brier", None), row.pop("brier_se", None)
    cases.append((json.dumps(old), cases[0][1]))
    expected.append(expected[0])
    chosen.append(chosen[0] + " (old document)")
    docs = [json.loads(doc) for doc, _ in cases]
    assert {d["method"] for d in docs} == {"multiclass-auto"}
    assert any("class_extras" in d for d in docs)
    for java_out, py, name in zip(run_batch(jar, tmp_path, cases), expected, chosen):
        assert_bits_equal(java_out, py, f"multiclass auto chose {name}")


def _valid_step() -> dict:
    return StepMap([0.5], [0.2, 0.8]).to_dict()


def _doc(**changes) -> str:
    d = _valid_step()
    d.update(changes)
    return json.dumps(d)


BAD_DOCUMENTS = {
    "unknown map type": (_doc(type="beta-ish"), "unknown map type"),
    "format_version 2": (_doc(format_version=2), "unsupported format_version"),
    "format_version 1.0": (_doc(format_version=1.0), "unsupported format_version"),
    "format_version true": (_doc(format_version=True), "unsupported format_version"),
    "missing values": (json.dumps({k: v for k, v in _valid_step().items() if k != "values"}),
                       "missing field 'values'"),
    "unsorted thresholds": (_doc(thresholds=[0.5, 0.4], values=[0.1, 0.2, 0.3]),
                            "strictly increasing"),
    "value above 1": (_doc(values=[0.2, 1.5]), "values must lie in [0, 1]"),
    "size mismatch": (_doc(values=[0.2, 0.3, 0.4]), "thresholds need"),
    "string in array": (_doc(values=[0.2, "0.8"]), "must be a list of numbers"),
    "boolean in array": (_doc(values=[0.2, True]), "must be a list of numbers"),
    "huge integer": (_doc(thresholds=[10 ** 320]), "non-finite"),
    "float out of range": (_doc()[:-1] + ', "extra": 1e400}', "out of the range"),
    "NaN literal": (_doc().replace("0.5", "NaN", 1), "not allowed"),
    "unknown transform": (_doc(input_transform="logit"), "unknown input_transform"),
    "null transform": (_doc(input_transform=None), "unknown input_transform"),
    "bad domain": (_doc(domain=[1.0, 0.0]), "domain"),
    "duplicate key": (_doc()[:-1] + ', "type": "step"}', "duplicate key"),
    "trailing comma": (_doc()[:-1] + ",}", "not valid JSON"),
    "truncated": (_doc()[:-5], "not valid JSON"),
    "too deep": ("[" * 40 + "]" * 40, "nested deeper"),
    "not an object": ("[1, 2]", "not an mlcal calibrator document"),
    "linear overflowing slope": (json.dumps({**LinearMap([0.0, 1.0], [0.0, 1.0]).to_dict(),
                                             "knots": [0.0, 1e-320]}), "slope overflows"),
    "sigmoid missing a": (json.dumps({"type": "sigmoid", "format_version": 1, "b": 0.0}),
                          "field 'a' must be a finite number"),
    "beta missing c": (json.dumps({"type": "beta", "format_version": 1, "a": 1.0, "b": 1.0}),
                       "field 'c' must be a finite number"),
    "beta string b": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(), "b": "1"}),
                      "field 'b' must be a finite number"),
    "quadratic null b": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0).to_dict(), "b": None}),
                         "field 'b' must be a finite number"),
    "quadratic missing on": (json.dumps({k: v for k, v in QuadraticMap(1.0, 0.1, 0.0).to_dict()
                                         .items() if k != "on"}), "field 'on' must be one of"),
    "quadratic bad on": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0).to_dict(), "on": "probit"}),
                         "field 'on' must be one of"),
    "quadratic unknown field": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0).to_dict(), "d": 1.0}),
                                "unknown field"),
    "quadratic floor 0.5": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0).to_dict(), "floor": 0.5}),
                            "floor must be a number in [0, 0.5)"),
    "quadratic margin after sigmoid": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0, on="margin")
                                                   .to_dict(), "input_transform": "sigmoid"}),
                                       "on='margin' takes raw margins"),
    "beta clamp lo above BETA_EPS": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                                 "clamp": [1e-10, 1 - 2.0 ** -40]}),
                                     "lo must lie in"),
    "beta clamp lo subnormal": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                            "clamp": [1e-310, 1 - 2.0 ** -40]}),
                                "lo must lie in"),
    "beta clamp lo zero": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                       "clamp": [0.0, 1 - 2.0 ** -40]}), "lo must lie in"),
    "beta clamp hi 1": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(), "clamp": [1e-300, 1.0]}),
                        "hi must lie in"),
    "beta clamp hi below default": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                                "clamp": [1e-300, 0.999]}), "hi must lie in"),
    "beta clamp one number": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(), "clamp": [1e-300]}),
                              "field 'clamp' must be a list of two numbers"),
    "beta clamp three numbers": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                             "clamp": [1e-300, 0.5, 1 - 1e-15]}),
                                 "field 'clamp' must be a list of two numbers"),
    "beta clamp scalar": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(), "clamp": 1e-300}),
                          "field 'clamp' must be a list of two numbers"),
    "beta clamp null": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(), "clamp": None}),
                        "field 'clamp' must be a list of two numbers"),
    "beta clamp string": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                      "clamp": ["1e-300", 0.5]}), "clamp"),
    "beta clamp huge integer": (json.dumps({**BetaMap(1.0, 1.0, 0.0).to_dict(),
                                            "clamp": [10 ** 320, 0.5]}), "clamp"),
    "quadratic clamp hi 1": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0).to_dict(),
                                         "clamp": [1e-300, 1.0]}), "hi must lie in"),
    "quadratic margin default clamp": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0, on="margin")
                                                   .to_dict(), "clamp": [2.0 ** -40,
                                                                         1 - 2.0 ** -40]}),
                                       "field 'clamp' applies to on='logit' only"),
    "quadratic margin clamp": (json.dumps({**QuadraticMap(1.0, 0.1, 0.0, on="margin").to_dict(),
                                           "clamp": [1e-300, 1 - 1e-15]}),
                               "field 'clamp' applies to on='logit' only"),
    "ovr with one class": (json.dumps({**MulticlassMap((StepMap([], [0.5]),) * 2).to_dict(),
                                       "maps": [_valid_step()]}), "at least 2 class maps"),
    "ovr nested multiclass": (json.dumps({**MulticlassMap((StepMap([], [0.5]),) * 2).to_dict(),
                                          "maps": [_valid_step(), SoftmaxAffineMap(
                                              [1.0, 1.0], [0.0, 0.0]).to_dict()]}),
                              "must be a binary map"),
    "softmax bad temperature": (json.dumps({**SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0])
                                            .to_dict(), "temperature": -1.0}), "temperature"),
    "softmax bad shape": (json.dumps({**SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0]).to_dict(),
                                      "weights": [[1.0, 0.0, 0.0]]}), "weights must have shape"),
    "softmax unknown input": (json.dumps({**SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0]).to_dict(),
                                          "input": "odds"}), "unknown input"),
    "softmax uniform weight 1": (json.dumps({**SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0])
                                             .to_dict(), "uniform_weight": 1.0}),
                                 "uniform_weight must be in [0, 1)"),
    "softmax floor above 1": (json.dumps({**SoftmaxAffineMap(
        [1.0, 1.0], [0.0, 0.0], input="log-probabilities").to_dict(), "probability_floor": 2.0}),
        "probability_floor must be in"),
    "softmax floor on logits": (json.dumps({**SoftmaxAffineMap([1.0, 1.0], [0.0, 0.0])
                                            .to_dict(), "probability_floor": 0.01}),
                                "applies to input 'log-probabilities' only"),
}


def _calibrator_doc(**changes) -> str:
    s, y = calibration_set(200, seed=8)
    doc = mlcal.get_calibrator("histogram").fit(s, y).to_dict()
    doc.update(changes)
    return json.dumps(doc)


BAD_DOCUMENTS.update({
    "calibrator wrong format": (_calibrator_doc(format="mlcal-model"),
                                "not an mlcal calibrator document"),
    "calibrator format_version 2": (_calibrator_doc(format_version=2),
                                    "unsupported calibrator format_version"),
    "calibrator params not an object": (_calibrator_doc(params=[1]),
                                        "'params' must be an object"),
    "calibrator method not a string": (_calibrator_doc(method=3), "'method' must be a string"),
    "calibrator with a bad map": (_calibrator_doc(map=json.loads(_doc(values=[0.2, 1.5]))),
                                  "calibrator document: step map: values must lie in [0, 1]"),
})


def _python_rejects(text: str) -> bool:
    try:
        mlcal.load_calibrator(text)
    except mlcal.CalibratorFormatError:
        pass
    else:
        return False
    from mlcal._safe_json import loads_strict
    try:
        map_from_dict(loads_strict(text))
    except (MapFormatError, ValueError):
        return True
    return False


def test_malformed_documents_raise_map_format_exception(jar, tmp_path):
    """Every document mlcal refuses, the Java evaluator refuses too, with a named exception."""
    cases = [(text, np.array([0.5])) for text, _ in BAD_DOCUMENTS.values()]
    results = run_batch(jar, tmp_path, cases)
    for (name, (text, phrase)), got in zip(BAD_DOCUMENTS.items(), results):
        assert _python_rejects(text), f"{name}: Python accepts the document"
        assert isinstance(got, str), f"{name}: the Java evaluator accepted it"
        assert got.startswith("MapFormatException: ") and phrase in got, (name, got)


def test_invalid_scores_raise_where_python_raises(jar, tmp_path):
    step = StepMap([0.5], [0.2, 0.8])
    ovr = MulticlassMap((step, step))
    cases = {"NaN": (step, np.array([0.1, np.nan, 0.3])),
             "inf": (step, np.array([np.inf])),
             "-inf sigmoid input": (SigmoidMap(-1.0, 0.0, input_transform="sigmoid"),
                                    np.array([0.0, -np.inf])),
             "empty": (step, np.array([])),
             "multiclass NaN": (ovr, np.array([0.1, 0.2, np.nan, 0.4]))}
    results = run_batch(jar, tmp_path, [(m.to_dict(), x) for m, x in cases.values()])
    for (name, (m, x)), got in zip(cases.items(), results):
        with pytest.raises(ValueError):
            m(x.reshape(-1, 2) if isinstance(m, MulticlassMap) else x)
        assert isinstance(got, str) and got.startswith("InvalidScoresException: "), (name, got)


def test_calibrator_document_and_text_cli(jar, tmp_path):
    """The user-facing CLI: a saved calibrator file, text scores in, hex bit patterns out."""
    s, y = calibration_set(300, seed=4)
    cal = mlcal.get_calibrator("isotonic").fit(s, y)
    path = Path(mlcal.save_calibrator(cal, tmp_path / "cal.json"))
    x = np.array([0.0, 0.25, 0.5, 1.0, 0.123456789, 1e-300])
    (tmp_path / "scores.txt").write_text("\n".join(repr(float(v)) for v in x) + "\n")
    proc = java(jar, path, tmp_path / "scores.txt", "--output", "hex")
    assert proc.returncode == 0, proc.stderr
    got = [int(h, 16) for h in proc.stdout.split()]
    assert got == cal.predict(x).view(np.uint64).tolist()
    proc = java(jar, path, tmp_path / "scores.txt")   # decimal text out
    assert np.array_equal(np.array(proc.stdout.split(), dtype=float), cal.predict(x))
    (tmp_path / "bad.txt").write_text("0.5\nNaN\n")
    proc = java(jar, path, tmp_path / "bad.txt")
    assert proc.returncode == 1 and "InvalidScoresException" in proc.stderr
    proc = java(jar, path)
    assert proc.returncode == 2 and "usage" in proc.stderr
    # --out never replaces a file without --overwrite
    (tmp_path / "kept.txt").write_text("mine")
    cmd = (path, tmp_path / "scores.txt", "--out", tmp_path / "kept.txt")
    proc = java(jar, *cmd)
    assert proc.returncode == 1 and "--overwrite" in proc.stderr
    assert (tmp_path / "kept.txt").read_text() == "mine"
    assert java(jar, *cmd, "--overwrite").returncode == 0
    assert np.array_equal(np.loadtxt(tmp_path / "kept.txt"), cal.predict(x))
    # a multiclass map reads one row per line (comma or blank separated) from standard input
    logits, _, yc = _multiclass_data(200, 3, seed=9)
    m = VectorScaling().fit(logits, yc).map_
    (tmp_path / "vector.json").write_text(json.dumps(m.to_dict()))
    rows = "\n".join(f"{a!r}, {b!r} {c!r}" for a, b, c in logits[:20].tolist())
    proc = java(jar, tmp_path / "vector.json", "-", "--output", "hex", stdin=rows)
    assert proc.returncode == 0, proc.stderr
    got = [[int(h, 16) for h in line.split(",")] for line in proc.stdout.splitlines()]
    assert got == m(logits[:20]).view(np.uint64).tolist()


def test_registered_map_kinds_match_python(jar):
    """Every map kind mlcal can write is one the evaluator reads (a new kind needs a Java
    class and one registration line in Maps.java)."""
    proc = java(jar, "--kinds")
    assert proc.returncode == 0, proc.stderr
    from mlcal.maps import MAP_TYPES
    assert sorted(proc.stdout.split()) == sorted(MAP_TYPES)
