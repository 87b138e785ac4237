"""The HTML report in a real headless Chromium: a balanced binary case, a 2 %-positive case, a
10-class model and a report with the calibration map (20,000 rows of data scattered under it)
render with no console error, no failed load and no request besides the page itself, and the
screenshot shows drawn figures where the page lays them out.

Chromium is driven over its DevTools pipe (:mod:`support.browser`): console messages come with
their level (``Runtime.consoleAPICalled``), uncaught exceptions and failed resource loads arrive
as ``Runtime.exceptionThrown`` / ``Log.entryAdded``, and ``Network.requestWillBeSent`` lists
every URL the page asked for. Without Chromium the module is skipped, unless
``MLCAL_REQUIRE_CHROMIUM=1`` (set by ``.ci/run``) makes that a failure.
"""

import io
import os

import numpy as np
import pytest

from mlcal.calibrators import Isotonic
from mlcal.report import build_report, write_report
from support.browser import find_chromium, render_page

CHROMIUM = find_chromium()


@pytest.fixture(scope="module")
def chromium():
    if CHROMIUM is None:
        reason = "chromium is not installed (apt-get install chromium)"
        if os.environ.get("MLCAL_REQUIRE_CHROMIUM"):
            pytest.fail(f"{reason} (MLCAL_REQUIRE_CHROMIUM is set)")
        pytest.skip(reason)
    return CHROMIUM


def _binary(rate_shift: float, n: int, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.normal(rate_shift, 1.5, n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    before = 1 / (1 + np.exp(-1.8 * z))        # over-confident
    after = 1 / (1 + np.exp(-z))               # the truth
    return y, before, after


def _multiclass(k: int = 10, n: int = 3000, seed: int = 0):
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 1.2, (n, k))
    proba = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    y = (proba.cumsum(1) < rng.uniform(size=(n, 1))).sum(1)
    sharp = np.exp(2.5 * logits) / np.exp(2.5 * logits).sum(1, keepdims=True)
    return y, sharp, proba


def _cases():
    y, b, a = _binary(0.0, 2000, 1)
    yield "balanced", {"y": y, "p_before": b, "p_after": a}
    y, b, a = _binary(-5.2, 5000, 2)
    yield "rare", {"y": y, "p_before": b, "p_after": a}
    y, b, a = _multiclass()
    yield "ten-class", {"y": y, "p_before": b, "p_after": a,
                        "classes": [f"class {c}" for c in "ABCDEFGHIJ"]}
    # the calibration map with its data scatter (drawn one marker per pixel)
    y, b, _ = _binary(-1.0, 20000, 3)
    cal = Isotonic().fit(b, y)
    yield "with-map", {"y": y, "p_before": b, "p_after": cal.predict(b), "calibrator": cal,
                       "map_data": (b, y)}


def _png(data: bytes) -> np.ndarray:
    from matplotlib.image import imread

    return imread(io.BytesIO(data), format="png")[..., :3]


@pytest.mark.parametrize("name,case", list(_cases()), ids=[c[0] for c in _cases()])
def test_report_renders_without_errors_and_draws_its_figures(chromium, tmp_path, name, case):
    if name == "rare":
        assert 0.01 < case["y"].mean() < 0.03
    page = build_report(**case, title=f"{name} report", n_resamples=50)
    path = tmp_path / f"{name}.html"
    write_report(path, page)
    result = render_page(chromium, path)
    assert result.errors() == []
    assert result.requests == [path.resolve().as_uri()]
    expected = {"balanced": 1, "rare": 2, "ten-class": 2, "with-map": 2}[name]
    assert len(result.figure_boxes) == expected
    shot = _png(result.screenshot)
    assert shot.shape[0] >= result.page_height - 1
    background = np.array([1.0, 1.0, 1.0])
    for box in result.figure_boxes:
        assert box["width"] > 300 and box["height"] > 250
        top, left = int(box["y"]), int(box["x"])
        region = shot[top:top + int(box["height"]), left:left + int(box["width"])]
        ink = np.any(np.abs(region - background) > 0.1, axis=2)
        # drawn: a few percent of the figure's pixels differ from the page, and in colour
        # (the red/blue curves and bands), not only black text
        assert 0.02 < ink.mean() < 0.6, ink.mean()
        colour = np.ptp(region, axis=2) > 0.2
        assert colour.mean() > 0.005
    # the page background around the figures is plain
    margin = shot[:, :20]
    assert np.all(np.abs(margin - background) < 0.02)
    if os.environ.get("MLCAL_REPORT_SCREENSHOTS"):   # to look at them by hand
        out = os.environ["MLCAL_REPORT_SCREENSHOTS"]
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, f"{name}.png"), "wb") as fh:
            fh.write(result.screenshot)
