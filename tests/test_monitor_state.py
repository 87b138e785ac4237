"""The monitoring loop's state files (mlcal.monitor.state), without MLflow: a bounded window,
crash-consistent saves, and loading that runs no code and refuses edited files by name."""

import io
import json
import os

import numpy as np
import pytest

from mlcal.monitor import CalibrationMonitor
from mlcal.monitor.state import LoopState, StateError, Window


def state_with(batches, keep=3, seed=0):
    rng = np.random.default_rng(seed)
    st = LoopState("m", "1", "run", 0, keep, CalibrationMonitor(), Window.empty(["a", "b"]))
    for b in range(1, batches + 1):
        n = 5 + b
        X, p = rng.normal(size=(n, 2)), rng.uniform(0.05, 0.95, n)
        y = (rng.random(n) < p).astype(int)
        st.monitor.update(p, y)
        st.window = st.window.append(X, p, X[:, 0], y, np.ones(n), b, keep)
        st.step = b
    return st


def test_the_window_keeps_exactly_the_rows_of_the_last_batches():
    st = state_with(6, keep=3)
    assert sorted(set(st.window.batch.tolist())) == [4, 5, 6]
    assert st.window.p.size == (5 + 4) + (5 + 5) + (5 + 6)
    assert st.window.since(6).p.size == 11


def test_save_load_round_trips_and_a_killed_save_leaves_the_old_pair(tmp_path):
    path = str(tmp_path / "state.json")
    st = state_with(4)
    st.save(path)
    again = LoopState.load(path)
    assert again.monitor.to_json() == st.monitor.to_json()
    for k in ("X", "p", "s", "y", "w", "batch"):
        assert np.array_equal(getattr(again.window, k), getattr(st.window, k))
    assert sorted(os.listdir(tmp_path)) == ["state.json", "state.json.window-4.npz"]
    # a process killed after writing the next step's window file but before the JSON: the
    # directory holds the old JSON, its window file and a stray new one; the old pair loads
    nxt = state_with(5)
    with open(f"{path}.window-5.npz", "wb") as fh:
        fh.write(nxt.window.to_bytes())
    assert LoopState.load(path).step == 4
    # the next save replaces both and removes the previous window file
    nxt.save(path)
    assert sorted(os.listdir(tmp_path)) == ["state.json", "state.json.window-5.npz"]
    assert LoopState.load(path).step == 5


def test_edits_and_object_arrays_are_refused_by_name(tmp_path):
    path = str(tmp_path / "state.json")
    state_with(2).save(path)
    doc = json.loads(open(path).read())
    doc["model_version"] = "9"
    open(path, "w").write(json.dumps(doc))
    with pytest.raises(StateError, match="state.json: its content does not match its digest"):
        LoopState.load(path)
    # an object array (np.load would need pickle for it) is refused, never unpickled
    buf = io.BytesIO()
    np.savez(buf, **{k: np.zeros(1) for k in ("X", "columns", "p", "s", "y", "w")},
             batch=np.array([object()], dtype=object))
    with pytest.raises(StateError, match="w.npz: not a readable window archive"):
        Window.from_bytes(buf.getvalue(), "w.npz")
    with pytest.raises(StateError, match="not a readable window archive"):
        Window.from_bytes(b"not a zip", "w.npz")
    os.remove(path)
    open(path, "w").write('{"format": "something else"}')
    with pytest.raises(StateError, match="not an mlcal monitor-loop state"):
        LoopState.load(path)
