"""The main job end to end on a real sqlite store in a temp dir (`--fast` method set)."""

import numpy as np
import pytest

mlflow = pytest.importorskip("mlflow")

from mlcal.cli import main  # noqa: E402


def test_quickstart_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        code = main(["quickstart", "--fast", "--workdir", str(tmp_path / "qs")])
    finally:
        mlflow.set_tracking_uri(None)
    out = capsys.readouterr().out
    assert code == 0, out
    for step in range(1, 8):
        assert f"[{step}/7]" in out
    # numba compilation happens (or is loaded from cache) before the timed fits, not in them
    assert out.index("numba kernels ready") < out.index("(base)")
    # the printed table: calibrated ECE below the base model's
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in {"(base)", "platt", "histogram", "isotonic",
                                                     "enir"}}
    base_ece = float(rows["(base)"][1])
    cal_ece = [float(r[4]) for name, r in rows.items() if name != "(base)"]
    assert len(cal_ece) == 4 and min(cal_ece) < base_ece
    # the registry holds the four versions and the champion alias; the ONNX file exists
    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'qs' / 'mlflow.db'}")
    versions = client.search_model_versions("name='mlcal-quickstart'")
    assert len(versions) == 4
    champion = client.get_model_version_by_alias("mlcal-quickstart", "champion")
    assert champion.tags["mlcal.gate.result"] == "promoted"
    assert (tmp_path / "qs" / f"champion-v{champion.version}.onnx").exists()
    assert "mlflow models serve -m 'models:/mlcal-quickstart@champion'" in out
    assert not (tmp_path / "mlruns").exists()  # artifacts stay in the workdir
    assert np.isfinite(base_ece)


def test_gate_rows_are_disjoint_from_the_rows_that_pick_the_champion():
    from mlcal.quickstart import _split

    X_tr, _, X_cal, _, X_sel, _, X_gate, y_gate = _split(0)
    parts = [set(X.index) for X in (X_tr, X_cal, X_sel, X_gate)]
    assert sum(map(len, parts)) == len(set().union(*parts)) == 569   # a partition
    assert not parts[2] & parts[3]
    assert len(y_gate) >= 100  # the gate's default minimum of rows
