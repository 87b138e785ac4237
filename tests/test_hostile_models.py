"""Issue #24: a corpus of tampered model directories (tests/hostile/make_model_dirs.py) against
``mlcal.mlflow.load_model`` and ``mlflow.pyfunc.load_model`` in a child process: each case ends
in the expected named mlcal error or a correct load, in bounded time and memory, and no planted
code ever runs."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mlflow")

#: per case: CPU seconds of the loading process (all its threads), which a loaded machine does
#: not inflate. Wall time did: at load average 11-19 the same case (mlmodel_huge through
#: pyfunc, 5.2 s of CPU) took 18 s and 77 s of wall time. A load that waits on something
#: instead of computing is caught by the runner's own timeout (the fixture's 300 s)
CASE_CPU_SECONDS = 10.0
#: what the tampered cases may add to the child's peak RSS over its setup's (imports, numba
#: compilation, the reference fit and first load). Measured as growth, not as the peak itself:
#: Linux carries the RSS high-water mark of the forking process (a pytest worker of 1.5 GB
#: late in a run) across fork and exec into the child's ru_maxrss
CASE_GROWTH_MB = 500
NAMED = {"ModelIntegrityError", "UnsafeModelFormatError", "CalibratorFormatError"}

_RUNNER = r"""
import json, resource, sys, time, traceback
from pathlib import Path
import numpy as np
from sklearn.linear_model import LogisticRegression
import mlflow.pyfunc
from mlcal import CalibratedModel
from mlcal.mlflow import load_model, save_model
from hostile.make_model_dirs import make_corpus

work = Path(sys.argv[1])
rng = np.random.default_rng(2)
X = rng.normal(size=(300, 3))
y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
model = CalibratedModel(LogisticRegression().fit(X[:150], y[:150]), "isotonic").fit(X[150:],
                                                                                    y[150:])
src = work / "source"
save_model(model, str(src), pip_requirements=["scikit-learn"], bundle_mlcal=False)
want = model.predict_proba(X)
load_model(str(src))       # the good model loads (and skops etc. are imported by now)
expected = make_corpus(src, work / "corpus", work / "MARKER")
setup_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
results = {}
for name in expected:
    path = str(work / "corpus" / name)
    for loader_name, loader in (("mlcal", load_model), ("pyfunc", mlflow.pyfunc.load_model)):
        t0, c0 = time.monotonic(), time.process_time()
        try:
            loaded = loader(path)
        except Exception as exc:
            outcome, message = type(exc).__name__, str(exc)[:300]
        else:
            raw = loaded.get_raw_model() if loader_name == "pyfunc" else loaded
            ok = np.array_equal(raw.predict_proba(X), want)
            outcome, message = ("loads" if ok else "WRONG PREDICTIONS"), ""
        results[f"{name}/{loader_name}"] = {"outcome": outcome, "message": message,
                                            "seconds": time.monotonic() - t0,
                                            "cpu_seconds": time.process_time() - c0}
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"expected": expected, "results": results, "peak_mb": peak_mb,
                  "setup_mb": setup_mb}))
"""


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    tests_dir = Path(__file__).parent
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(work)], capture_output=True,
                          text=True, timeout=300, cwd=tests_dir,
                          env={**__import__("os").environ,
                               "PYTHONPATH": f"{tests_dir.parent}:{tests_dir}"})
    assert proc.returncode == 0, proc.stderr[-4000:]
    run = json.loads(proc.stdout.strip().splitlines()[-1])
    run["marker"] = work / "MARKER"
    return run


def test_the_corpus_is_large_enough(corpus_run):
    assert len(corpus_run["expected"]) >= 40


def test_no_planted_code_ever_ran(corpus_run):
    assert not corpus_run["marker"].exists()


def test_mlcal_load_model_gives_the_expected_named_error_or_a_correct_load(corpus_run):
    wrong = {name: (want, corpus_run["results"][f"{name}/mlcal"])
             for name, want in corpus_run["expected"].items()
             if corpus_run["results"][f"{name}/mlcal"]["outcome"] != want}
    assert wrong == {}


def test_pyfunc_load_model_ends_in_a_named_error_or_a_correct_load(corpus_run):
    # MLflow itself parses MLmodel before calling the flavour: a missing or unparsable MLmodel
    # is refused by MLflow (MlflowException, yaml errors); everything else reaches the flavour
    mlflow_first = {"mlmodel_removed", "mlmodel_not_yaml", "mlmodel_list", "loader_module_changed"}
    bad = {}
    for name, want in corpus_run["expected"].items():
        got = corpus_run["results"][f"{name}/pyfunc"]
        if name in mlflow_first:
            ok = got["outcome"] not in ("loads", "WRONG PREDICTIONS")
        else:
            ok = got["outcome"] == want
        if not ok:
            bad[name] = got
    assert bad == {}


def test_each_case_is_bounded_in_time_and_memory(corpus_run):
    slow = {k: (r["cpu_seconds"], r["seconds"]) for k, r in corpus_run["results"].items()
            if r["cpu_seconds"] > CASE_CPU_SECONDS}
    assert slow == {}
    assert corpus_run["peak_mb"] - corpus_run["setup_mb"] < CASE_GROWTH_MB
