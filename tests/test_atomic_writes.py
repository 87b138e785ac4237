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


# -- whole model directories (issue #24, finding 2) --------------------------------------------
# Fits two calibrated models with different predictions, then for every trial saves the "old"
# one, forks a child that replaces it with the "new" one (save_model(overwrite=True)) and
# SIGKILLs that child: at each named checkpoint of the save (the child kills itself there) and
# after random delays. The test then checks what each killed save left behind.
_DIR_KILLER = r"""
import json, os, random, signal, sys, time
import numpy as np
from sklearn.linear_model import LogisticRegression
from mlcal import CalibratedModel
from mlcal._atomic import KILL_AT_ENV
from mlcal.mlflow import save_model

work, checkpoints, n_random = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
X = rng.normal(size=(400, 3))
y = (X[:, 0] + rng.normal(size=400) > 0).astype(int)
base = LogisticRegression().fit(X[:200], y[:200])
models = {"old": CalibratedModel(base, "isotonic").fit(X[200:], y[200:]),
          "new": CalibratedModel(base, "platt").fit(X[200:], y[200:])}
kw = dict(pip_requirements=["scikit-learn"], bundle_mlcal=False)
np.save(os.path.join(work, "X.npy"), X)
for name, m in models.items():
    np.save(os.path.join(work, name + ".npy"), m.predict_proba(X))

def trial(target, kill_at=None, delay=None):
    save_model(models["old"], target, **kw)
    pid = os.fork()
    if pid == 0:
        if kill_at:
            os.environ[KILL_AT_ENV] = kill_at
        while True:    # kill_at stops it at the checkpoint; a delay stops it wherever it is
            save_model(models["new"], target, overwrite=True, **kw)
            if kill_at:
                os._exit(3)   # the checkpoint was never reached
    if delay is not None:
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, (target, status)

for k in checkpoints:
    trial(os.path.join(work, "at-" + k), kill_at=k)
t0 = time.monotonic()
save_model(models["new"], os.path.join(work, "timing"), **kw)
one_save = time.monotonic() - t0
delays = random.Random(1).sample(range(1000), n_random)
for i, d in enumerate(delays):   # spread over about three saves of the child's loop
    trial(os.path.join(work, f"random-{i}"), delay=3 * one_save * d / 1000)
"""

SAVE_CHECKPOINTS = ["save-calibrator-written", "save-base-written", "save-sealed", "dir-built",
                    "dir-old-moved", "dir-new-in-place", "dir-old-removed"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_anywhere_in_save_model_overwrite_leaves_old_or_new(tmp_path):
    pytest.importorskip("mlflow")
    import json

    from mlcal.mlflow import load_model, save_model

    n_random = 13   # with the 7 checkpoints: 20 killed saves
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", _DIR_KILLER, str(tmp_path),
                           json.dumps(SAVE_CHECKPOINTS), str(n_random)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    X = np.load(tmp_path / "X.npy")
    expected = {name: np.load(tmp_path / f"{name}.npy") for name in ("old", "new")}
    targets = [f"at-{k}" for k in SAVE_CHECKPOINTS] + [f"random-{i}" for i in range(n_random)]
    seen = {}
    for name in targets:
        target = tmp_path / name
        model = load_model(str(target))    # restores a half-done swap first
        p = model.predict_proba(X)
        got = [k for k, v in expected.items() if np.array_equal(p, v)]
        assert len(got) == 1, f"{name}: neither the old nor the new model"
        seen[name] = got[0]
        save_model(model, str(target), overwrite=True, pip_requirements=["scikit-learn"],
                   bundle_mlcal=False)   # and the next save just works
        np.testing.assert_array_equal(load_model(str(target)).predict_proba(X), p)
    # before the swap the old model stays, once the new one is renamed in it is there
    assert [seen[f"at-{k}"] for k in SAVE_CHECKPOINTS] == ["old"] * 5 + ["new"] * 2
    leftovers = [e for e in os.listdir(tmp_path) if ".mlcal-" in e]
    assert leftovers == [], leftovers


def test_recover_directory_restores_or_cleans_each_leftover(tmp_path):
    from mlcal._atomic import recover_directory

    target = tmp_path / "model"
    backup = tmp_path / ".model.mlcal-old"
    backup.mkdir()
    (backup / "MLmodel").write_text("old")
    recover_directory(target)          # killed between the two renames: the old one comes back
    assert (target / "MLmodel").read_text() == "old" and not backup.exists()
    backup.mkdir()
    recover_directory(target)          # killed before the backup was removed: it goes
    assert not backup.exists() and (target / "MLmodel").read_text() == "old"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    stale = tmp_path / f".model.mlcal-new-{dead}-abc"
    live = tmp_path / f".model.mlcal-new-{os.getpid()}-abc"   # a save still in progress
    other = tmp_path / f".other.mlcal-new-{dead}-abc"         # another target's
    for d in (stale, live, other):
        d.mkdir()
    recover_directory(target)
    assert not stale.exists() and live.exists() and other.exists()
