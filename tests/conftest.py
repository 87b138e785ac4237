"""Shared fixtures, and the ``integration`` marker for the slow end-to-end modules."""

from pathlib import Path

import pytest

# modules that start servers, processes, virtual environments or whole pipelines: marked
# ``integration`` so that ``pytest -m "not integration"`` is a fast inner loop (the full suite,
# README's test command, still runs them)
INTEGRATION_MODULES = {
    "test_mlflow_serve", "test_dockerfile", "test_quickstart", "test_examples",
    "test_registry_concurrency", "test_cpu_determinism", "test_warmup", "test_boosted_models",
    "test_multiclass_serve", "test_spark", "test_spark_mlflow", "test_kernel_cache",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if Path(str(item.fspath)).stem in INTEGRATION_MODULES:
            item.add_marker(pytest.mark.integration)


@pytest.fixture()
def sqlite_tracking(tmp_path, monkeypatch):
    """A real MLflow sqlite tracking/registry store in a temp dir, with an experiment whose
    artifacts also live there (never ./mlruns). Yields the tracking URI."""
    mlflow = pytest.importorskip("mlflow")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
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
