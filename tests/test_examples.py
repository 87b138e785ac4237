"""Every script in examples/ runs to completion (they write only to temporary directories).

The two long examples run end to end on a smaller size given by their documented flags (the figures
the docs quote are those of the default size): the boosted-trees example on 12 000 rows instead of
120 000 and without its HTML reports (``--no-reports``; still XGBoost, two logged calibrations with
their metrics, the gate's decisions, a real `mlflow models serve` and the ONNX export; no test
opens those reports, which cost half of the script's CPU seconds: the calibration run's report is
rendered and checked by tests/test_report_mlflow.py and test_report_browser.py, the gate's by
test_gate_mcb_report.py and test_monitor_loop.py), the month of monitoring on 2 days and its
defaults otherwise (a temporary store, a champion logged and promoted by the gate, the loop logging
a diagram per batch; the shift, on day 16 by default, is not reached):
tests/test_example_monitor_month.py runs the same script on a 10-day month through the alarm, the
re-offset candidate and the gate and checks the outcome in detail, so running the alarm here too
would only repeat it."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.py"))
# command-line arguments for the examples that take a size (default: none)
ARGS = {"calibrate_boosted_trees_imbalanced.py": ["--rows", "12000", "--no-reports"],
        "monitor_month.py": ["--days", "2"]}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    proc = subprocess.run([sys.executable, str(script), *ARGS.get(script.name, [])],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert not (tmp_path / "mlruns").exists()
