import itertools

import numpy as np
import pytest
from sklearn.isotonic import IsotonicRegression

from mlcal import Isotonic, LinearMap, StepMap
from mlcal._solvers.pava import pava


def brute_force_isotonic(y, w):
    """Minimum weighted SSE over all partitions into contiguous blocks whose means increase."""
    n = len(y)
    best, best_fit = np.inf, None
    for cuts in itertools.product([0, 1], repeat=n - 1):
        bounds = [0] + [i + 1 for i, c in enumerate(cuts) if c] + [n]
        fit = np.empty(n)
        means = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            means.append(np.dot(w[a:b], y[a:b]) / w[a:b].sum())
            fit[a:b] = means[-1]
        if np.all(np.diff(means) >= -1e-12):
            sse = np.dot(w, (y - fit) ** 2)
            if sse < best - 1e-12:
                best, best_fit = sse, fit
    return best_fit


@pytest.mark.parametrize("seed", range(20))
def test_pava_equals_brute_force_on_tiny_inputs(seed):
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 10)
    y = rng.integers(0, 2, n).astype(float) if seed % 2 else rng.random(n)
    w = rng.uniform(0.1, 3.0, n)
    np.testing.assert_allclose(pava(y, w), brute_force_isotonic(y, w), atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.usefixtures("without_output_floor")
def test_interpolated_isotonic_equals_sklearn(seed):
    rng = np.random.default_rng(seed)
    n = 3000
    s = np.round(rng.random(n), 2 + seed % 2)  # plenty of ties
    y = (rng.random(n) < s ** 2).astype(float)
    w = rng.uniform(0.0, 2.0, n) if seed % 2 else None
    ours = Isotonic(interpolate=True).fit(s, y, sample_weight=w)
    ref = IsotonicRegression(out_of_bounds="clip").fit(s, y, sample_weight=w)
    t = np.concatenate([rng.uniform(-0.2, 1.2, 5000), s, ref.X_thresholds_])
    assert isinstance(ours.map_, LinearMap)
    np.testing.assert_allclose(ours.predict(t), ref.predict(t), rtol=0, atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_step_isotonic_gives_block_values_and_midpoint_cuts():
    s = np.array([0.1, 0.2, 0.3, 0.4, 0.6])
    y = np.array([0, 1, 0, 1, 1.0])
    cal = Isotonic(interpolate=False).fit(s, y)
    assert isinstance(cal.map_, StepMap)
    # PAVA pools 0.2 and 0.3 into one block with mean 0.5; 0.4 and 0.6 pool at 1
    np.testing.assert_allclose(cal.map_.values, [0.0, 0.5, 1.0])
    np.testing.assert_allclose(cal.map_.thresholds, [0.15, 0.35])
    assert cal.n_blocks_ == 3
    np.testing.assert_allclose(cal.predict(s), [0, 0.5, 0.5, 1, 1])


def test_tied_scores_get_one_value_and_integer_weights_equal_repeats():
    rng = np.random.default_rng(3)
    s = rng.integers(0, 20, 400) / 20
    y = (rng.random(400) < s).astype(float)
    reps = rng.integers(1, 4, 400)
    a = Isotonic().fit(s, y, sample_weight=reps)
    b = Isotonic().fit(np.repeat(s, reps), np.repeat(y, reps))
    grid = np.linspace(-0.1, 1.1, 999)
    np.testing.assert_allclose(a.predict(grid), b.predict(grid), atol=1e-12)


@pytest.mark.usefixtures("without_output_floor")
def test_step_variant_with_adjacent_float_scores():
    a = 0.7
    b = np.nextafter(a, 1.0)
    cal = Isotonic(interpolate=False).fit([a, b], [0, 1])
    np.testing.assert_array_equal(cal.predict([a, b]), [0.0, 1.0])
