"""The calibration map's data scatter is drawn one marker per occupied pixel: the markers equal a
brute-force pixel rounding of the data, every occupied pixel is drawn (and inked in a PNG), and
a report of 1e5 rows stays small (the marker per row made it 15.3 MB)."""

import math
import re

import numpy as np
import pytest

from mlcal.calibrators import get_calibrator
from mlcal.plotting import plot_map
from mlcal.plotting.diagrams import DATA_ALPHA, pixel_markers
from mlcal.report import build_report
from mlcal.report.figures import figure_svg


def _data(n: int, seed: int):
    rng = np.random.default_rng(seed)
    z = rng.normal(-1.0, 1.5, n)
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-z))).astype(int)
    return 1 / (1 + np.exp(-1.8 * z)), y


def _brute_force_cells(xy) -> dict[tuple[int, int], int]:
    cells: dict[tuple[int, int], int] = {}
    for x, y in xy:
        key = (math.floor(x), math.floor(y))
        cells[key] = cells.get(key, 0) + 1
    return cells


def test_pixel_markers_equal_a_brute_force_pixel_count():
    rng = np.random.default_rng(5)
    # clustered, so that many pixels hold several markers
    xy = np.concatenate([rng.uniform(0, 40, (300, 2)), rng.normal(10, 0.7, (400, 2))])
    centres, opacity = pixel_markers(xy, 0.25)
    cells = _brute_force_cells(xy)
    got = {(c[0] - 0.5, c[1] - 0.5): a for c, a in zip(centres.tolist(), opacity.tolist())}
    assert set(got) == set(cells)
    assert max(cells.values()) > 5
    for key, count in cells.items():
        # n markers of alpha a composite to 1 - (1 - a)^n (one over the other)
        stacked = 0.0
        for _ in range(count):
            stacked = stacked + 0.25 * (1 - stacked)
        assert got[key] == pytest.approx(stacked, abs=5.01e-4)   # 3 decimals
    # non-finite points are not drawn; no points, no markers
    centres, opacity = pixel_markers([[1.2, 3.4], [1.7, 3.9], [np.nan, 1.0]], 0.25)
    assert centres.tolist() == [[1.5, 3.5]] and opacity[0] == pytest.approx(0.4375, abs=5.01e-4)
    assert pixel_markers(np.zeros((0, 2)), 0.25)[0].shape == (0, 2)
    with pytest.raises(ValueError, match="shape"):
        pixel_markers(np.zeros(4), 0.25)
    with pytest.raises(ValueError, match="alpha"):
        pixel_markers(xy, 1.5)


def _plotted(fig, scores, y):
    """The data points in SVG coordinates (points, y down), computed from the axes' box by hand."""
    ax = fig.axes[0]
    box = ax.get_position()
    (xlo, xhi), (ylo, yhi) = ax.get_xlim(), ax.get_ylim()
    w, h = fig.get_size_inches() * 72
    jitter = np.random.default_rng(0).uniform(-0.02, 0.02, len(scores))   # plot_map's jitter
    px = [(box.x0 + (s - xlo) / (xhi - xlo) * box.width) * w for s in scores]
    py = [(box.y0 + (v - ylo) / (yhi - ylo) * box.height) * h for v in y + jitter]
    return list(zip(px, py)), h


def _svg_markers(svg: str) -> dict[tuple[float, float], float]:
    out = {}
    for use in re.findall(r"<use [^>]*fill: #808080[^>]*>", svg):
        x = float(re.search(r'\bx="([^"]+)"', use).group(1))
        y = float(re.search(r'\by="([^"]+)"', use).group(1))
        opacity = re.search(r"fill-opacity: ([0-9.]+)", use)
        out[(x, y)] = float(opacity.group(1)) if opacity else 1.0
    return out


def test_map_svg_draws_one_marker_per_occupied_pixel_as_brute_force():
    scores, y = _data(400, 7)
    scores = np.concatenate([scores, scores[:60]])      # repeated rows share a pixel
    y = np.concatenate([y, y[:60]])
    cal = get_calibrator("isotonic").fit(scores, y)
    fig = plot_map(cal, scores=scores, y=y)
    svg = figure_svg(fig, "f3")
    assert figure_svg(fig, "f3") == svg                 # drawing leaves the artist as it was
    points, height = _plotted(fig, scores, y)
    # no point within 1e-6 pt of a pixel edge: the expected pixels do not hang on rounding
    frac = np.array(points) % 1.0
    assert np.all(np.minimum(frac, 1 - frac) > 1e-6)
    cells = _brute_force_cells(points)
    expected = {(cx + 0.5, height - (cy + 0.5)): 1 - (1 - DATA_ALPHA) ** n
                for (cx, cy), n in cells.items()}
    drawn = _svg_markers(svg)
    assert len(drawn) == len(expected) < len(points)    # merged, and every pixel drawn
    assert set(drawn) == set(expected)
    for key, opacity in expected.items():
        assert drawn[key] == pytest.approx(opacity, abs=5.01e-4), key   # 3 decimals


def test_map_png_is_inked_where_the_data_are():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    scores, y = _data(300, 11)
    cal = get_calibrator("isotonic").fit(scores, y)
    fig = plot_map(cal, scores=scores, y=y)
    dpi = 110                                           # plot_map's PNG dpi
    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(dpi)
    canvas.draw()
    img = np.asarray(canvas.buffer_rgba())[..., :3].astype(float) / 255
    points, height = _plotted(fig, scores, y)
    legend = fig.axes[0].get_legend().get_window_extent(canvas.get_renderer())
    scale = dpi / 72
    white = under_legend = 0
    for x, v in points:
        if legend.contains(x * scale, v * scale):       # the legend box hides the data there
            under_legend += 1
            continue
        col, row = int(x * scale), int((height - v) * scale)
        if np.all(img[row, col] > 0.97):
            white += 1
    assert white == 0
    assert under_legend < 50
    # and the figure is not grey all over: most of the plot area stays white
    assert np.mean(np.all(img > 0.97, axis=2)) > 0.5


def test_report_of_1e5_rows_stays_small():
    scores, y = _data(100_000, 3)
    cal = get_calibrator("isotonic").fit(scores, y)
    page = build_report(y, scores, cal.predict(scores), calibrator=cal, map_data=(scores, y),
                        n_resamples=10)
    # one marker per row wrote 15.3 MB here (benchmarks/bench_report_render.py: 15,280 kB);
    # one per pixel is bounded by the plot area (~7,000 markers): 1.1 MB
    assert len(page) < 2_000_000
    svg = page[page.index("id='map'"):]
    assert 3000 < len(_svg_markers(svg)) < 400 * 300
