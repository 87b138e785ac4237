"""Shared fixtures, the ``integration`` marker for the slow end-to-end modules, and the order
in which pytest-xdist hands test files to its workers."""

import os
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# OpenMP threads (XGBoost, LightGBM, scikit-learn's histogram trees) that wait at a barrier
# sleep instead of spinning: the suite runs one xdist worker per core, so a spinning thread burns
# the core its sibling thread (or the other worker) needs. XGBoost with 2 threads took 40x the CPU
# seconds of 1 thread at load average 12 (10.7 against 0.27 s), 0.29 s with this setting; beside
# one other busy process (CI's two workers) the gap is small (0.35-0.40 against 0.31-0.33 s).
# Results do not change (the same work in the same threads); set here, before any test module
# loads an OpenMP runtime (it reads the variable once), and inherited by every subprocess the
# tests start (examples, docs pages, servers). An explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# modules that start servers, processes, virtual environments or whole pipelines: marked
# ``integration`` so that ``pytest -m "not integration"`` is a fast inner loop (the full suite,
# README's test command, still runs them)
INTEGRATION_MODULES = {
    "test_mlflow_serve", "test_dockerfile", "test_quickstart", "test_examples",
    "test_registry_concurrency", "test_cpu_determinism", "test_warmup", "test_boosted_models",
    "test_multiclass_serve", "test_spark", "test_spark_mlflow", "test_kernel_cache",
}


# the modules that take longest (per-module wall seconds of the last fresh-clone CI, re-ranked
# after the Spark table literal and the smaller example runs, and again after the gate tests
# stopped rendering HTML reports they do not check: test_registry, test_multiclass_gate), handed
# out first under ``-n N --dist loadfile --no-loadscope-reorder`` so that no long module starts
# last and leaves the other workers idle (longest-first scheduling); the rest follow in their
# usual order
SLOW_FIRST = ("test_dockerfile", "test_examples", "test_docs_examples", "test_spark",
              "test_java_evaluator", "test_cpu_determinism", "test_boosted_models",
              "test_warmup", "test_registry", "test_quickstart",
              "test_registry_concurrency", "test_monitor_loop",
              "test_honest_metrics", "test_example_monitor_month", "test_monitor_spark",
              "test_spark_mlflow", "test_multicalibration_flavor", "test_kernel_cache",
              "test_gate_server", "test_multiclass_gate", "test_mlflow_serve",
              "test_spark_segmented",
              "test_hostile_documents", "test_report_browser", "test_multiclass_serve",
              "test_java_multicalibration", "test_hostile_models", "test_offset_spark",
              "test_multicalibration_spark", "test_segmented_flavor", "test_docs_site")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).stem in INTEGRATION_MODULES:
            item.add_marker(pytest.mark.integration)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # only under xdist (every worker sorts the same way, so their collections agree);
        # a serial run keeps pytest's own order
        rank = {name: i for i, name in enumerate(SLOW_FIRST)}
        items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))


@contextmanager
def _exclusive(lock_path: Path):
    """Hold an exclusive lock on ``lock_path`` (between xdist workers; no-op without fcntl)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: one process per run there
        yield
        return
    with open(lock_path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run_temp_root(tmp_path_factory) -> Path:
    """A folder shared by every worker of this run (the per-worker base temps' parent under
    xdist; this process's base temp otherwise)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def _missing_jdk() -> str | None:
    for tool in ("java", "javac", "jar"):
        if shutil.which(tool) is None:
            return (f"{tool} is not installed: the Java evaluator tests need a JDK 11+ (e.g. "
                    "apt-get install default-jdk-headless)")
    return None


@pytest.fixture(scope="session")
def jar(tmp_path_factory) -> Path:
    """The Java evaluator's jar, built from jvm/src with the system JDK (``jvm/build.sh``) once
    per test run: under xdist the first worker to need it builds it into a folder every worker
    shares, the others wait on a lock and reuse it."""
    reason = _missing_jdk()
    if reason:
        if os.environ.get("MLCAL_REQUIRE_JAVA"):
            pytest.fail(f"{reason} (MLCAL_REQUIRE_JAVA is set)")
        pytest.skip(reason)
    shared = _run_temp_root(tmp_path_factory)
    out = shared / "jvm"
    built = out / "mlcal-calibrator.jar"
    with _exclusive(shared / "jvm.lock"):
        if not built.is_file():
            proc = subprocess.run(["bash", str(ROOT / "jvm" / "build.sh"), str(out)],
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr
    return built


@pytest.fixture(scope="session")
def fresh_install(tmp_path_factory):
    """The Dockerfile's `pip install` line run once per test run in a new virtual environment,
    on the emulated baseline CPU (support/fresh_install.py says what it is and which tests share
    its one full kernel compile): a :class:`support.fresh_install.FreshInstall`. Under xdist the
    first worker to need it builds it into a folder every worker shares; the others wait on a
    lock and reuse it."""
    from support.fresh_install import FreshInstall, build, process_env

    shared = _run_temp_root(tmp_path_factory)
    root = shared / "fresh-install"
    done = shared / "fresh-install.done"
    with _exclusive(shared / "fresh-install.lock"):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)      # never a half-built environment
            root.mkdir()
            build(root)
            done.write_text("")
    return FreshInstall(root, root / "venv", process_env())


@pytest.fixture()
def sqlite_tracking(tmp_path, monkeypatch):
    """A real MLflow sqlite tracking/registry store in a temp dir, with an experiment whose
    artifacts also live there (never ./mlruns). Yields the tracking URI. The empty store is a
    copy of one MLflow migrated once per process (support.mlflow_store.new_sqlite_db)."""
    mlflow = pytest.importorskip("mlflow")
    from support.mlflow_store import new_sqlite_db

    uri = new_sqlite_db(tmp_path / "mlflow.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    mlflow.create_experiment("tests", artifact_location=(tmp_path / "artifacts").as_uri())
    mlflow.set_experiment("tests")
    yield uri
    mlflow.set_tracking_uri(None)


@pytest.fixture(autouse=True)
def _no_mlflow_environment_leaks():
    """MLflow writes some settings into os.environ (set_experiment sets MLFLOW_EXPERIMENT_ID);
    restore every MLFLOW_* variable after each test so none leaks into later tests' stores or
    subprocesses."""
    import os

    before = {k: v for k, v in os.environ.items() if k.startswith("MLFLOW_")}
    yield
    for key in [k for k in os.environ if k.startswith("MLFLOW_") and k not in before]:
        del os.environ[key]
    os.environ.update(before)


@pytest.fixture()
def without_output_floor(monkeypatch):
    """Fits without the output floor (mlcal.calibrators.output_floor): for the tests that
    check a fitting algorithm's own values against a reference or a formula, which can be
    exactly 0 or 1 on their tiny inputs. The floor itself is tested in test_output_floor.py."""
    import mlcal.calibrators.base as base

    monkeypatch.setattr(base, "data_floor", lambda w: 0.0)


@pytest.fixture(scope="session")
def spark():
    """One local Spark session for every Spark test module this process runs (test_spark,
    test_spark_mlflow, test_offset_spark, test_spark_segmented, test_monitor_spark,
    test_multicalibration_spark): each used to start and stop its own."""
    from support.spark import local_spark

    session = local_spark()
    yield session
    session.stop()
