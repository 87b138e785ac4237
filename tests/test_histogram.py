import numpy as np
import pytest

from mlcal import HistogramBinning, StepMap


@pytest.mark.usefixtures("without_output_floor")
def test_equal_frequency_bins_hold_their_fraction_of_positives():
    s = np.arange(12) / 12
    y = np.array([0, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 1.0])
    cal = HistogramBinning(n_bins=3).fit(s, y)
    assert isinstance(cal.map_, StepMap) and cal.n_bins_ == 3
    np.testing.assert_allclose(cal.map_.values, [1 / 4, 3 / 4, 1.0])
    np.testing.assert_allclose(cal.map_.thresholds, [(s[3] + s[4]) / 2, (s[7] + s[8]) / 2])


@pytest.mark.usefixtures("without_output_floor")
def test_ties_are_never_split_across_bins():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 7, 500) / 7  # 7 distinct scores
    y = (rng.random(500) < s).astype(float)
    cal = HistogramBinning(n_bins=5).fit(s, y)
    # every cut lies strictly between two distinct training scores
    u = np.unique(s)
    for t in cal.map_.thresholds:
        assert not np.any(np.isclose(u, t))
    # each bin's value is the fraction of positives of the points it holds
    bins = np.searchsorted(cal.map_.thresholds, s, side="right")
    for b, v in enumerate(cal.map_.values):
        assert v == pytest.approx(y[bins == b].mean(), abs=1e-12)


def test_auto_bin_count_follows_cube_root_of_n():
    rng = np.random.default_rng(1)
    s = rng.random(8000)
    y = (rng.random(8000) < s).astype(float)
    assert HistogramBinning().fit(s, y).n_bins_ == 20


def test_weighted_bins_equal_repeated_rows():
    rng = np.random.default_rng(2)
    s = rng.random(200)
    y = (rng.random(200) < s).astype(float)
    reps = rng.integers(1, 4, 200)
    a = HistogramBinning(n_bins=6).fit(s, y, sample_weight=reps)
    b = HistogramBinning(n_bins=6).fit(np.repeat(s, reps), np.repeat(y, reps))
    assert a.map_ == b.map_


@pytest.mark.parametrize("bad", [0, -3, 2.5, "many", True])
def test_bad_bin_count_is_rejected(bad):
    with pytest.raises(ValueError, match="n_bins"):
        HistogramBinning(n_bins=bad).fit([0.1, 0.9], [0, 1])


@pytest.mark.usefixtures("without_output_floor")
def test_adjacent_float_scores_keep_their_own_bins():
    a = 0.3
    b = np.nextafter(a, 1.0)
    s = np.array([a, a, b, b])
    y = np.array([0, 0, 1, 1.0])
    for cal in (HistogramBinning(n_bins=2).fit(s, y),):
        np.testing.assert_array_equal(cal.predict([a, b]), [0.0, 1.0])
