import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from mlcal import load_calibrator
from mlcal.cli import main
from mlcal.plotting import plot_map, reliability_diagram


@pytest.fixture()
def csv(tmp_path):
    rng = np.random.default_rng(0)
    s = rng.random(500)
    y = (rng.random(500) < s ** 2).astype(int)
    path = tmp_path / "cal.csv"
    pd.DataFrame({"score": s, "label": y}).to_csv(path, index=False)
    return path, s, y


def test_fit_then_evaluate(csv, tmp_path, capsys):
    path, s, y = csv
    out = tmp_path / "iso.json"
    assert main(["fit", "--method", "isotonic", "--data", str(path), "--label-column", "label",
                 "--param", "interpolate=false", "--out", str(out)]) == 0
    cal = load_calibrator(str(out))
    assert cal.get_params() == {"interpolate": False, "max_map_size": 10_000,
                               "bound_smoothing": None}
    assert main(["evaluate", "--calibrator", str(out), "--data", str(path),
                 "--label-column", "label", "--json"]) == 0
    report = json.loads(capsys.readouterr().out.split("\n", 2)[-1])
    assert report["after"]["ece"] < report["before"]["ece"]
    # refusing to overwrite, then --force
    assert main(["fit", "--method", "platt", "--data", str(path), "--label-column", "label",
                 "--out", str(out)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["fit", "--method", "platt", "--data", str(path), "--label-column", "label",
                 "--out", str(out), "--force"]) == 0
    assert load_calibrator(str(out)).method_name == "platt"


def test_fit_auto_says_what_it_chose(csv, tmp_path, capsys):
    path, _, _ = csv
    out = tmp_path / "auto.json"
    assert main(["fit", "--method", "auto", "--data", str(path), "--label-column", "label",
                 "--out", str(out)]) == 0
    chosen = load_calibrator(str(out)).selection_["chosen"]
    assert f"auto chose {chosen}: " in capsys.readouterr().out


def test_cli_errors_name_the_problem(csv, tmp_path, capsys):
    path, _, _ = csv
    assert main(["fit", "--method", "isotonic", "--data", str(path), "--label-column", "nope",
                 "--out", str(tmp_path / "x.json")]) == 2
    assert "no column" in capsys.readouterr().err
    assert main(["fit", "--method", "magic", "--data", str(path), "--label-column", "label",
                 "--out", str(tmp_path / "x.json")]) == 2
    assert "unknown calibrator" in capsys.readouterr().err


def test_console_script_help_and_demo():
    exe = [sys.executable, "-m", "mlcal"]
    assert "evaluate" in subprocess.run(exe + ["--help"], capture_output=True, text=True,
                                        check=True).stdout
    out = subprocess.run(exe + ["demo", "--methods", "platt", "isotonic"], capture_output=True,
                         text=True, check=True).stdout
    assert "(base)" in out and "isotonic" in out


def test_plots_write_png(csv, tmp_path):
    path, s, y = csv
    from mlcal import Isotonic

    cal = Isotonic(interpolate=False).fit(s, y)
    for fig_path, make in [
        (tmp_path / "rel.png", lambda p: reliability_diagram(y, s, cal.predict(s), path=p)),
        (tmp_path / "map.png", lambda p: plot_map(cal, scores=s, y=y, path=p)),
    ]:
        fig = make(str(fig_path))
        assert fig_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(fig.axes) >= 1
