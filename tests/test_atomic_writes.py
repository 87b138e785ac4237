"""Artifact writes are atomic: a writer killed mid-write leaves the old file intact, never a
truncated one, and nothing is overwritten without overwrite=True."""

import os
import signal
import stat
import subprocess
import sys
import time

import numpy as np
import pytest

from mlcal import Isotonic
from mlcal._atomic import atomic_path, write_atomic
from mlcal.calibrators.base import load_calibrator, save_calibrator

# Saves a calibrator whose JSON is ~100 MB over an existing file, so the write takes long
# enough to be caught in the middle.
_HUGE_WRITER = r"""
import sys
import numpy as np
from mlcal import HistogramBinning
from mlcal.calibrators.base import save_calibrator
from mlcal.maps import StepMap

n = 2_500_000
rng = np.random.default_rng(0)
cal = HistogramBinning()
cal.map_ = StepMap(np.sort(rng.random(n - 1)), rng.random(n))
save_calibrator(cal, sys.argv[1], overwrite=True)
"""


def _small_calibrator():
    rng = np.random.default_rng(1)
    s = rng.random(200)
    return Isotonic().fit(s, (rng.random(200) < s).astype(float))


def _snapshot(path):
    st = os.stat(path)
    return st.st_ino, st.st_size, st.st_mtime_ns


def test_sigterm_during_overwrite_leaves_the_old_file_intact(tmp_path):
    target = tmp_path / "calibrator.json"
    save_calibrator(_small_calibrator(), str(target))
    original = target.read_bytes()
    before = _snapshot(target)
    proc = subprocess.Popen([sys.executable, "-c", _HUGE_WRITER, str(target)])
    try:
        deadline = time.monotonic() + 120
        # wait until the writer has started writing: data in a new file beside the target
        # (atomic writer) or the target itself changed (truncated in place)
        while time.monotonic() < deadline and proc.poll() is None:
            others = [p for p in tmp_path.iterdir() if p != target]
            if any(p.stat().st_size > 0 for p in others) or _snapshot(target) != before:
                break
            time.sleep(0.001)
        assert proc.poll() is None, "the writer finished before it could be interrupted"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert target.read_bytes() == original
    assert load_calibrator(target).map_ == load_calibrator(original).map_


def test_refuses_to_overwrite_without_asking(tmp_path):
    target = tmp_path / "a.json"
    target.write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        write_atomic(target, "new")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        save_calibrator(_small_calibrator(), str(target))
    assert target.read_text() == "mine"
    assert os.listdir(tmp_path) == ["a.json"]   # no temporary file left behind


def test_a_file_created_while_writing_is_not_clobbered(tmp_path):
    target = tmp_path / "a.json"
    with pytest.raises(FileExistsError):
        with atomic_path(target) as tmp:
            with open(tmp, "w") as fh:
                fh.write("new")
            target.write_text("someone else's")   # appears between the check and the rename
    assert target.read_text() == "someone else's"
    assert os.listdir(tmp_path) == ["a.json"]


def test_a_failing_writer_changes_nothing(tmp_path):
    target = tmp_path / "a.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target, overwrite=True) as tmp:
            with open(tmp, "w") as fh:
                fh.write("half")
            raise RuntimeError("writer died")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["a.json"]


def test_file_modes_match_a_plain_write(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("x")
    fresh = tmp_path / "fresh"
    write_atomic(fresh, "x")
    assert stat.S_IMODE(fresh.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)
    os.chmod(plain, 0o640)
    write_atomic(plain, "y", overwrite=True)   # replacing keeps the replaced file's mode
    assert stat.S_IMODE(plain.stat().st_mode) == 0o640 and plain.read_text() == "y"


def test_plots_and_onnx_are_written_whole_with_no_leftovers(tmp_path):
    from mlcal.onnx import save, to_onnx
    from mlcal.plotting import plot_map

    cal = _small_calibrator()
    png = tmp_path / "map.png"
    plot_map(cal, path=str(png))
    plot_map(cal, path=str(png))   # plots are regenerated output: replaced, atomically
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    onnx_path = tmp_path / "cal.onnx"
    save(to_onnx(cal), str(onnx_path))
    with pytest.raises(FileExistsError):
        save(to_onnx(cal), str(onnx_path))
    import onnx

    onnx.checker.check_model(onnx.load(str(onnx_path)))
    assert sorted(os.listdir(tmp_path)) == ["cal.onnx", "map.png"]
