"""The data-taken score clamp of the logit-family maps (issue #26): :class:`BetaMap` and
:class:`QuadraticMap` (``on="logit"``) read scores through ``clamp = [lo, hi]``, by default
``[BETA_EPS, 1 - BETA_EPS]``; a fit widens it to its most extreme calibration scores inside
``(0, 1)`` (:func:`mlcal.maps.binary.data_clamp`).

Format (optional field ``"clamp"``, absent = the default, written only when not the default;
refused when out of range), documents written before the field (by main at 7a1d29c's parent,
embedded below with their predictions' bits), the evaluation against mpmath, the fits
against scipy's optimiser on the clamped features, and the output floor over the wider range.
"""

from __future__ import annotations

import json

import mpmath
import numpy as np
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from mlcal import load_calibrator
from mlcal._solvers.platt_newton import platt_targets
from mlcal._solvers.ties import sort_and_collapse
from mlcal.calibrators.catalog import get_calibrator
from mlcal.calibrators.output_floor import floor_map
from mlcal.maps import (BETA_EPS, DEFAULT_CLAMP, BetaMap, MapFormatError, QuadraticMap,
                        map_from_dict)
from mlcal.maps.binary import MIN_CLAMP_LO, data_clamp


def test_the_lowest_lo_is_the_smallest_normal_double():
    assert MIN_CLAMP_LO == 2.0 ** -1022 == np.finfo(np.float64).tiny

#: maps fitted by main before the clamp existed (beta, platt-logit, temperature, quadratic and
#: beta "ab" on 300 beta-distributed scores; each also without its floor), with the bits of
#: their predictions at the probes (0, 1e-300, 2^-1022, 2^-41, 2^-40, 1e-9, 0.3, 0.5, 0.9,
#: 1 - 2^-40, 1 - 1e-17, 1), written by main's mlcal
MAIN_DOCUMENTS = json.loads("".join([
    "{\"scores\": [\"0x0.0p+0\", \"0x1.56e1fc2f8f359p-997\", \"0x1.0000000000000p-1022\","
    " \"0x1.0000000000000p-41\", \"0x1.0000000000000p-40\", \"0x1.12e0be826d695p-30\", "
    "\"0x1.3333333333333p-2\", \"0x1.0000000000000p-1\", \"0x1.ccccccccccccdp-1\", \"0x1"
    ".fffffffffe000p-1\", \"0x1.0000000000000p+0\", \"0x1.0000000000000p+0\"], \"maps\":"
    " [{\"doc\": {\"type\": \"beta\", \"format_version\": 1, \"input_transform\": \"identity"
    "\", \"domain\": [9.409841253858751e-08, 0.9990693323929534], \"a\": 0.70576726848"
    "74788, \"b\": 1.1829633296869282, \"c\": -0.42777497687439925, \"floor\": 0.001661"
    "1295681063123}, \"p\": [\"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1"
    ".b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1."
    "b37484ad806cep-10\", \"0x1.316cc7bdef31dp-2\", \"0x1.e72f7916fdd30p-2\", \"0x1.cde"
    "b289d37f75p-1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645b"
    "da93fdp-1\"]}, {\"doc\": {\"type\": \"beta\", \"format_version\": 1, \"input_transform"
    "\": \"identity\", \"domain\": [9.409841253858751e-08, 0.9990693323929534], \"a\": 0"
    ".7057672684874788, \"b\": 1.1829633296869282, \"c\": -0.42777497687439925}, \"p\":"
    " [\"0x1.1c79b81118012p-29\", \"0x1.1c79b81118012p-29\", \"0x1.1c79b81118012p-29\","
    " \"0x1.1c79b81118012p-29\", \"0x1.1c79b81118012p-29\", \"0x1.3753341c8a4f9p-22\", "
    "\"0x1.316cc7bdef31dp-2\", \"0x1.e72f7916fdd30p-2\", \"0x1.cdeb289d37f75p-1\", \"0x1"
    ".fffffffffffb1p-1\", \"0x1.fffffffffffb1p-1\", \"0x1.fffffffffffb1p-1\"]}, {\"doc\""
    ": {\"type\": \"beta\", \"format_version\": 1, \"input_transform\": \"identity\", \"doma"
    "in\": [9.409841253858751e-08, 0.9990693323929534], \"a\": 0.9187399829092128, \""
    "b\": 0.9187399829092128, \"c\": -0.012276106774331275, \"floor\": 0.0016611295681"
    "063123}, \"p\": [\"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484"
    "ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484a"
    "d806cep-10\", \"0x1.3f807add87445p-2\", \"0x1.fcdb7bb1074a0p-2\", \"0x1.c34fb8da0d"
    "6e2p-1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645bda93fdp"
    "-1\"]}, {\"doc\": {\"type\": \"beta\", \"format_version\": 1, \"input_transform\": \"ide"
    "ntity\", \"domain\": [9.409841253858751e-08, 0.9990693323929534], \"a\": 0.918739"
    "9829092128, \"b\": 0.9187399829092128, \"c\": -0.012276106774331275}, \"p\": [\"0x1"
    ".2cce5c75c4198p-37\", \"0x1.2cce5c75c4198p-37\", \"0x1.2cce5c75c4198p-37\", \"0x1."
    "2cce5c75c4198p-37\", \"0x1.2cce5c75c4198p-37\", \"0x1.6dab5a00b0571p-28\", \"0x1.3"
    "f807add87445p-2\", \"0x1.fcdb7bb1074a0p-2\", \"0x1.c34fb8da0d6e2p-1\", \"0x1.fffff"
    "fffecbb8p-1\", \"0x1.ffffffffecbb8p-1\", \"0x1.ffffffffecbb8p-1\"]}, {\"doc\": {\"ty"
    "pe\": \"beta\", \"format_version\": 1, \"input_transform\": \"identity\", \"domain\": ["
    "9.409841253858751e-08, 0.9990693323929534], \"a\": 0.9196539966298322, \"b\": 0."
    "9196539966298322, \"c\": 0.0, \"floor\": 0.0016611295681063123}, \"p\": [\"0x1.b374"
    "84ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b3748"
    "4ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.420919"
    "26fd710p-2\", \"0x1.0000000000000p-1\", \"0x1.c41247914b8cep-1\", \"0x1.ff2645bda9"
    "3fdp-1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645bda93fdp-1\"]}, {\"doc\": {\"type\": "
    "\"beta\", \"format_version\": 1, \"input_transform\": \"identity\", \"domain\": [9.409"
    "841253858751e-08, 0.9990693323929534], \"a\": 0.9196539966298322, \"b\": 0.91965"
    "39966298322, \"c\": 0.0}, \"p\": [\"0x1.28e6c2cf21196p-37\", \"0x1.28e6c2cf21196p-3"
    "7\", \"0x1.28e6c2cf21196p-37\", \"0x1.28e6c2cf21196p-37\", \"0x1.28e6c2cf21196p-37"
    "\", \"0x1.6b3d7be52854ap-28\", \"0x1.42091926fd710p-2\", \"0x1.0000000000000p-1\", "
    "\"0x1.c41247914b8cep-1\", \"0x1.ffffffffed719p-1\", \"0x1.ffffffffed719p-1\", \"0x1"
    ".ffffffffed719p-1\"]}, {\"doc\": {\"type\": \"quadratic\", \"format_version\": 1, \"in"
    "put_transform\": \"identity\", \"domain\": [9.409841253858751e-08, 0.999069332392"
    "9534], \"on\": \"logit\", \"a\": 0.9311745394100557, \"b\": 0.02226133441123774, \"c\""
    ": -0.0501617185089307, \"floor\": 0.0016611295681063123}, \"p\": [\"0x1.b37484ad8"
    "06cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad80"
    "6cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.386a40f3e7a"
    "e7p-2\", \"0x1.f3294a6ee317fp-2\", \"0x1.c84e9682ff7c4p-1\", \"0x1.ff2645bda93fdp-"
    "1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645bda93fdp-1\"]}, {\"doc\": {\"type\": \"quad"
    "ratic\", \"format_version\": 1, \"input_transform\": \"identity\", \"domain\": [9.409"
    "841253858751e-08, 0.9990693323929534], \"on\": \"logit\", \"a\": 0.931174539410055"
    "7, \"b\": 0.02226133441123774, \"c\": -0.0501617185089307}, \"p\": [\"0x1.4a9edf66e"
    "8022p-13\", \"0x1.4a9edf66e8022p-13\", \"0x1.4a9edf66e8022p-13\", \"0x1.4a9edf66e8"
    "022p-13\", \"0x1.4a9edf66e8022p-13\", \"0x1.d741bee4c9172p-15\", \"0x1.386a40f3e7a"
    "e7p-2\", \"0x1.f3294a6ee317fp-2\", \"0x1.c84e9682ff7c4p-1\", \"0x1.0000000000000p+"
    "0\", \"0x1.0000000000000p+0\", \"0x1.0000000000000p+0\"]}, {\"doc\": {\"type\": \"beta"
    "\", \"format_version\": 1, \"input_transform\": \"identity\", \"domain\": [9.40984125"
    "3858751e-08, 0.9990693323929534], \"a\": 0.7895319450706435, \"b\": 1.0904079003"
    "083114, \"c\": -0.20855132007126975, \"floor\": 0.0016611295681063123}, \"p\": [\"0"
    "x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x"
    "1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1.b37484ad806cep-10\", \"0x1"
    ".4407777e3c83ap-2\", \"0x1.0000000000000p-1\", \"0x1.cdcbadd3c46d6p-1\", \"0x1.ff2"
    "645bda93fdp-1\", \"0x1.ff2645bda93fdp-1\", \"0x1.ff2645bda93fdp-1\"]}, {\"doc\": {\""
    "type\": \"beta\", \"format_version\": 1, \"input_transform\": \"identity\", \"domain\":"
    " [9.409841253858751e-08, 0.9990693323929534], \"a\": 0.7895319450706435, \"b\": "
    "1.0904079003083114, \"c\": -0.20855132007126975}, \"p\": [\"0x1.15ca03384fd81p-32"
    "\", \"0x1.15ca03384fd81p-32\", \"0x1.15ca03384fd81p-32\", \"0x1.15ca03384fd81p-32\""
    ", \"0x1.15ca03384fd81p-32\", \"0x1.11465b9842582p-24\", \"0x1.4407777e3c83ap-2\", "
    "\"0x1.0000000000000p-1\", \"0x1.cdcbadd3c46d6p-1\", \"0x1.ffffffffffcc9p-1\", \"0x1"
    ".ffffffffffcc9p-1\", \"0x1.ffffffffffcc9p-1\"]}]}"
]))

LOGIT_METHODS = ["beta", "platt-logit", "temperature", "quadratic"]


def _saturated(n, seed):
    """Naive-Bayes-like scores: log-odds spread over hundreds of units (as test_quadratic)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(-20.0, 60.0, n)
    y = (rng.random(n) < expit(z / 20.0)).astype(int)
    return expit(z), y


@pytest.mark.parametrize("i", range(len(MAIN_DOCUMENTS["maps"])))
def test_documents_written_before_the_field_predict_the_same_bits(i):
    entry = MAIN_DOCUMENTS["maps"][i]
    m = map_from_dict(entry["doc"])
    assert m.clamp == DEFAULT_CLAMP == (2.0 ** -40, 1.0 - 2.0 ** -40)
    assert m.to_dict() == entry["doc"] and "clamp" not in m.to_dict()
    assert json.dumps(m.to_dict()) == json.dumps(entry["doc"])   # same bytes
    x = np.array([float.fromhex(v) for v in MAIN_DOCUMENTS["scores"]])
    assert [float(v).hex() for v in m(x)] == entry["p"]


@pytest.mark.parametrize("method", LOGIT_METHODS)
def test_fits_on_unsaturated_scores_keep_the_default_clamp(method):
    """Calibration scores inside [BETA_EPS, 1 - BETA_EPS] (exact 0 and 1 included: they are
    read as the clamp's ends, not taken as its ends) give the default clamp and no field."""
    rng = np.random.default_rng(3)
    s = np.concatenate([rng.uniform(BETA_EPS, 1 - BETA_EPS, 200), [0.0, 0.0, 1.0, 1.0]])
    y = (rng.random(s.size) < s).astype(int)
    cal = get_calibrator(method).fit(s, y)
    assert cal.map_.clamp == DEFAULT_CLAMP and "clamp" not in cal.map_.to_dict()


def test_data_clamp_is_the_extreme_scores_inside_the_unit_interval():
    tiny = 5e-324   # subnormal: read at the lowest lo, 2^-1022
    assert data_clamp(np.array([0.0, 0.3, 1.0])) == DEFAULT_CLAMP
    assert data_clamp(np.array([])) == DEFAULT_CLAMP
    assert data_clamp(np.array([0.0, 1e-300, 1e-20, 0.5])) == (1e-300, DEFAULT_CLAMP[1])
    assert data_clamp(np.array([tiny, 0.5, 1 - 2.0 ** -53, 1.0])) == (2.0 ** -1022,
                                                                      1 - 2.0 ** -53)
    assert data_clamp(np.array([2.0 ** -39, 1 - 2.0 ** -39])) == DEFAULT_CLAMP
    rng = np.random.default_rng(0)
    for _ in range(20):   # brute force against the definition
        x = np.concatenate([expit(rng.normal(0, 300, 50)), rng.choice([0.0, 1.0], 3)])
        pos = [v for v in x if v > 0]
        below = [v for v in x if v < 1]
        want = (max(min([BETA_EPS] + pos), 2.0 ** -1022), max([1 - BETA_EPS] + below))
        assert data_clamp(x) == want


@pytest.mark.parametrize("m", [
    BetaMap(0.05, 0.07, 0.1, clamp=(1e-300, 1 - 2.0 ** -52)),
    BetaMap(0.3, 1.1, -0.2, floor=1e-3, clamp=(2.0 ** -1022, 1 - 2.0 ** -53)),
    BetaMap(0.5, 0.5, 0.0, input_transform="sigmoid", clamp=(3e-100, 1 - 2.0 ** -40)),
    QuadraticMap(0.06, 1e-4, 0.2, clamp=(1e-300, 1 - 2.0 ** -52)),
    QuadraticMap(0.1, -0.01, 0.5, floor=1e-4, clamp=(2.0 ** -1022, 1 - 3 * 2.0 ** -53)),
])
def test_clamp_round_trips_through_json_bit_for_bit(m):
    d = m.to_dict()
    assert d["clamp"] == list(m.clamp) and list(d)[-1] == "clamp"
    back = map_from_dict(json.loads(json.dumps(d)))
    assert back == m and back.clamp == m.clamp
    x = np.array([0.0, 1e-310, 1e-300, 2.0 ** -1022, 1e-200, 1e-30, 0.2, 0.7, 1 - 1e-15,
                  1 - 2.0 ** -53, 1 - 1e-17, 1.0])
    assert np.array_equal(back(x), m(x))


def test_a_document_spelling_out_the_default_clamp_is_read_as_the_default():
    doc = BetaMap(0.5, 0.7, 0.1).to_dict()
    m = map_from_dict(dict(doc, clamp=[2.0 ** -40, 1 - 2.0 ** -40]))
    assert m.clamp == DEFAULT_CLAMP and m.to_dict() == doc


@pytest.mark.parametrize("clamp", [
    [5e-324, 0.9999999999999999],         # subnormal lo
    [0.0, 0.9999999999999999],
    [2.0 ** -39, 1 - 2.0 ** -40],         # lo above BETA_EPS: narrower than the default
    [2.0 ** -40, 1 - 2.0 ** -39],         # hi below 1 - BETA_EPS
    [2.0 ** -40, 1.0],                    # hi = 1
    [2.0 ** -40, 1.5],
    [-1e-300, 1 - 2.0 ** -40],
    [float("nan"), 1 - 2.0 ** -40],
    [2.0 ** -40, float("inf")],
    [1e-300],
    [1e-300, 1 - 2.0 ** -41, 0.5],
    "1e-300",
    None,
    [True, 1 - 2.0 ** -41],
    ["1e-300", 1 - 2.0 ** -41],
    {"lo": 1e-300, "hi": 1 - 2.0 ** -41},
    [10 ** 400, 1 - 2.0 ** -41],
])
@pytest.mark.parametrize("kind", ["beta", "quadratic"])
def test_bad_clamps_are_refused_naming_the_field(kind, clamp):
    doc = (BetaMap(0.5, 0.7, 0.1) if kind == "beta" else QuadraticMap(0.5, 0.01, 0.1)).to_dict()
    with pytest.raises(MapFormatError, match="clamp"):
        map_from_dict(dict(doc, clamp=clamp))
    if isinstance(clamp, list) and len(clamp) == 2 and all(
            isinstance(v, float) for v in clamp):
        with pytest.raises(MapFormatError, match="clamp"):
            (BetaMap if kind == "beta" else QuadraticMap)(0.5, 0.7, 0.1, clamp=tuple(clamp))


def test_a_margin_quadratic_map_has_no_clamp():
    doc = QuadraticMap(0.5, 0.01, 0.1, on="margin").to_dict()
    assert "clamp" not in doc
    for clamp in ([1e-300, 1 - 2.0 ** -52], [2.0 ** -40, 1 - 2.0 ** -40]):
        with pytest.raises(MapFormatError, match="clamp.*on='logit'"):
            map_from_dict(dict(doc, clamp=clamp))
    with pytest.raises(MapFormatError, match="clamp.*on='logit'"):
        QuadraticMap(0.5, 0.01, 0.1, on="margin", clamp=(1e-300, 1 - 2.0 ** -52))


def _mp_beta(m, s):
    """The map at score ``s`` in 80-digit arithmetic (the clamp, the logs and the logistic),
    and the sum of the magnitudes of the log-odds' terms (its condition: float64 evaluation
    moves the log-odds by a few ulps of that sum)."""
    mpmath.mp.dps = 80
    sc = min(max(mpmath.mpf(float(s)), mpmath.mpf(m.clamp[0])), mpmath.mpf(m.clamp[1]))
    l1, l2 = mpmath.log(sc), mpmath.log(1 - sc)
    if isinstance(m, BetaMap):
        eta = m.a * l1 - m.b * l2 + m.c
        size = abs(m.a * l1) + abs(m.b * l2) + abs(m.c)
    else:
        z = l1 - l2
        eta = m.a * z + m.b * z * z + m.c
        size = abs(m.a) * (abs(z) + abs(l1) + abs(l2)) + 3 * abs(m.b) * z * z + abs(m.c)
    p = 1 / (1 + mpmath.exp(-eta))
    p = min(max(p, mpmath.mpf(m.floor)), 1 - mpmath.mpf(m.floor)) if m.floor else p
    return float(p), float(min(p, 1 - p)), float(size)


@pytest.mark.parametrize("m", [
    BetaMap(0.05, 0.07, 0.1, clamp=(1e-300, 1 - 2.0 ** -52)),
    BetaMap(1.0, 1.0, 0.0, clamp=(2.0 ** -1022, 1 - 2.0 ** -53)),
    QuadraticMap(0.06, 1e-4, 0.2, clamp=(1e-300, 1 - 2.0 ** -52)),
    QuadraticMap(0.01, -1e-5, 0.5, clamp=(2.0 ** -1022, 1 - 2.0 ** -53)),
])
def test_evaluation_matches_mpmath_over_the_wider_range(m):
    """Every score, 0 and 1 included, is read as ``clip(s, lo, hi)``: ordered down to ``lo``,
    flat beyond; the map's value is the exact formula's to a few ulps (relative)."""
    s = np.array([0.0, 5e-324, 1e-310, 2.0 ** -1022, 1e-300, 3e-300, 1e-250, 1e-100, 1e-13,
                  0.01, 0.5, 0.99, 1 - 1e-13, 1 - 2.0 ** -52, 1 - 2.0 ** -53, 1 - 1e-17, 1.0])
    got = m(s)
    want, tail, size = (np.array(v) for v in zip(*(_mp_beta(m, v) for v in s)))
    # relative to the nearer end: the log-odds' rounding (a few ulps of its terms' size) and
    # the logs', expit's and the final rounding
    tol = 8 * 2.0 ** -53 * (size + 4) * tail + 2 * np.spacing(want) + 1e-320
    assert np.all(np.abs(got - want) <= tol)
    inside = (s > m.clamp[0]) & (s < m.clamp[1])
    assert np.all(got[s <= m.clamp[0]] == m(np.array([m.clamp[0]]))[0])
    assert np.all(got[s >= m.clamp[1]] == m(np.array([m.clamp[1]]))[0])
    assert np.unique(got[inside]).size == np.unique(s[inside]).size   # the order is kept


def _scipy_logit_fit(s, y, clamp, intercept):
    """Platt on the log-odds by scipy: smoothed targets on the collapsed points, the features
    of the scores clamped to ``clamp`` (mpmath logs), slope >= 0."""
    x, ybar, w = sort_and_collapse(s, y.astype(float), np.ones(s.size))
    t = platt_targets(ybar, w)
    mpmath.mp.dps = 40
    sc = np.clip(x, *clamp)
    z = np.array([float(mpmath.log(v) - mpmath.log(1 - mpmath.mpf(v))) for v in sc])

    def loss(theta):
        k, c = theta[0], (theta[1] if intercept else 0.0)
        eta = k * z + c
        return float(np.sum(w * (np.logaddexp(0, eta) - t * eta)))
    res = minimize(loss, [0.05, 0.0] if intercept else [0.05], method="L-BFGS-B",
                   bounds=[(0, None), (None, None)] if intercept else [(0, None)],
                   options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10000})
    return res.x


@pytest.mark.parametrize("method", ["platt-logit", "temperature"])
def test_fit_uses_the_data_clamp_in_its_own_features(method):
    s, y = _saturated(400, 7)
    cal = get_calibrator(method).fit(s, y)
    clamp = cal.map_.clamp
    assert clamp == data_clamp(s) and clamp[0] < 1e-50
    want = _scipy_logit_fit(s, y, clamp, intercept=method == "platt-logit")
    assert cal.map_.a == cal.map_.b
    assert abs(cal.map_.a - want[0]) <= 1e-6 * max(1.0, abs(want[0]))
    if method == "platt-logit":
        assert abs(cal.map_.c - want[1]) <= 1e-5 * max(1.0, abs(want[1]))


@pytest.mark.parametrize("method", LOGIT_METHODS)
def test_saturated_fits_round_trip_and_stay_off_0_and_1(method):
    """On saturated scores (exact 0 and 1 among them) the fitted map carries its clamp through
    JSON, and its output floor keeps every prediction, at any score, off 0 and 1."""
    s, y = _saturated(500, 11)
    s[:3], s[3:6] = 0.0, 1.0
    cal = get_calibrator(method).fit(s, y)
    assert cal.map_.clamp == data_clamp(s) != DEFAULT_CLAMP
    back = load_calibrator(cal.to_json())
    assert back.map_.clamp == cal.map_.clamp
    grid = np.concatenate([[0.0, 5e-324, 1e-300, 1.0, 1 - 1e-17],
                           expit(np.linspace(-800, 40, 400))])
    p = cal.predict(grid)
    assert np.array_equal(back.predict(grid), p)
    floor = 1.0 / (2.0 * (s.size + 1))   # output_floor's data floor
    assert p.min() >= floor and p.max() <= 1 - floor
    steep = floor_map(BetaMap(5.0, 5.0, 0.0, clamp=cal.map_.clamp), floor)
    assert steep.floor == floor and steep(grid).min() == floor


@pytest.mark.parametrize("m", [
    BetaMap(3.0, 0.1, 0.0, clamp=(1e-300, 1 - 2.0 ** -52)),
    BetaMap(0.02, 0.02, 0.0, clamp=(2.0 ** -1022, 1 - 2.0 ** -53)),
    BetaMap(0.02, 0.02, 0.0),
    QuadraticMap(0.05, 1e-4, 0.0, clamp=(1e-300, 1 - 2.0 ** -52)),
    QuadraticMap(0.0, -1e-6, 0.0, clamp=(1e-300, 1 - 2.0 ** -52)),
    QuadraticMap(0.0, -1e-6, 0.0),
])
def test_output_floor_is_set_exactly_when_the_clamp_range_leaves_it(m):
    """``floor_map`` sets the floor iff the map over all scores (0 to 1, i.e. the clamp's whole
    range, probed densely in log-odds) leaves ``[floor, 1 - floor]``."""
    floor = 1e-3
    grid = np.concatenate([[0.0, m.clamp[0], m.clamp[1], 1.0],
                           expit(np.linspace(-720, 40, 20001))])
    p = m(grid)
    leaves = bool(p.min() < floor or p.max() > 1 - floor)
    floored = floor_map(m, floor)
    assert (floored.floor == floor) == leaves
    q = floored(grid)
    assert q.min() >= floor and q.max() <= 1 - floor


@pytest.mark.parametrize("method", ["beta", "quadratic"])
def test_segmented_and_offset_maps_carry_the_inner_clamp(method):
    """A segmented calibrator's shared map and an offset map's inner map are the fitted maps
    themselves: they carry the data clamp through JSON, the evaluation and the ONNX graph."""
    import onnxruntime as ort

    import mlcal
    from mlcal.onnx import error_bound, to_onnx
    s, y = _saturated(800, 21)
    seg = np.array(["a", "b"] * 400)
    cal = mlcal.SegmentedCalibrator(method, n_folds=None).fit(s, y, seg)
    assert cal.map_.inner.clamp == data_clamp(s) != DEFAULT_CLAMP
    text = cal.to_json()
    assert json.loads(text)["map"]["inner"]["clamp"] == list(data_clamp(s))
    back = load_calibrator(text)
    assert back.to_json() == text
    assert np.array_equal(back.predict(s, seg), cal.predict(s, seg))

    off = mlcal.reoffset(get_calibrator(method).fit(s, y), 0.4)
    assert off.map_.inner.clamp == data_clamp(s)
    assert load_calibrator(off.to_json()).to_json() == off.to_json()
    x = np.concatenate([[0.0, 1e-300, 2.0 ** -1022, 1.0, 1 - 1e-17], s])
    sess = ort.InferenceSession(to_onnx(off).SerializeToString())
    got = sess.run(None, {sess.get_inputs()[0].name: x})[0].reshape(-1)
    assert np.abs(got - off.predict(x)).max() <= error_bound(off.map_)


def test_deterministic_logs_are_correctly_rounded_down_to_the_lowest_lo():
    """The clamp's lowest ``lo`` is 2^-1022 because the logs it feeds are exact there:
    ``det_log`` and ``det_log1p(-s)`` within 1 ulp of mpmath's at 100 digits over scores from
    2^-1022 up (and ``1 - s`` down to 2^-53)."""
    from mlcal._solvers.detmath import det_log1p_array, det_log_array
    mpmath.mp.dps = 100
    rng = np.random.default_rng(5)
    s = np.concatenate([[2.0 ** -1022, np.nextafter(2.0 ** -1022, 1.0), 1e-300, 2.0 ** -40],
                        10.0 ** -rng.uniform(12, 307.6, 300), 1 - 2.0 ** -rng.integers(41, 54, 20)])
    log_s, log_1ms = det_log_array(s), det_log1p_array(-s)
    want_s = np.array([float(mpmath.log(mpmath.mpf(v))) for v in s])
    want_1ms = np.array([float(mpmath.log1p(-mpmath.mpf(v))) for v in s])
    assert np.all(np.abs(log_s - want_s) <= np.spacing(np.abs(want_s)))
    assert np.all(np.abs(log_1ms - want_1ms) <= np.spacing(np.abs(want_1ms)))


@pytest.mark.parametrize("method", LOGIT_METHODS)
def test_rows_of_zero_weight_do_not_move_the_clamp(method):
    """The clamp comes from the scores of positive weight (the tie-collapsed points every fit
    sees): a fit with extra zero-weight rows at 1e-300 and 1 - 2^-53 is the fit without them,
    bit for bit (only the recorded ``domain``, which spans every row, differs)."""
    rng = np.random.default_rng(8)
    s = rng.uniform(0.01, 0.99, 300)
    y = (rng.random(300) < s).astype(int)
    s2 = np.concatenate([s, [1e-300, 1 - 2.0 ** -53]])
    y2 = np.concatenate([y, [1, 0]])
    w2 = np.concatenate([np.ones(300), [0.0, 0.0]])
    plain = get_calibrator(method).fit(s, y)
    padded = get_calibrator(method).fit(s2, y2, sample_weight=w2)
    assert padded.map_.clamp == DEFAULT_CLAMP
    d_plain, d_padded = plain.map_.to_dict(), padded.map_.to_dict()
    assert d_padded.pop("domain") == [1e-300, 1 - 2.0 ** -53]
    d_plain.pop("domain")
    assert d_padded == d_plain
