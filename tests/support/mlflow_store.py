"""A real MLflow sqlite tracking store for a whole test module, leaving no global state behind;
new empty stores copied from one MLflow migrated once per process."""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import mlflow

# environment variables MLflow's fluent API may set while a store is active
_MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_EXPERIMENT_ID")

_template: Path | None = None


def new_sqlite_db(path: Path, cwd: Path | None = None) -> str:
    """Put a new, empty MLflow sqlite store at ``path`` and return its tracking URI.

    MLflow creates a store by running its schema migrations, one committed (fsync'ed)
    transaction after another: 1.5 s of CPU and 10 s or more of wall time on a busy disk, for
    every test that wants a store of its own. Here MLflow creates one empty store per process
    (its own code, its own schema) and each new store is a byte copy of it, with the one value
    that depends on where it was made set as MLflow would have set it here: the Default
    experiment's artifact location (``<cwd>/mlruns/0``, with ``cwd`` the working directory of
    the process that will open the store: this one by default). Everything after that
    (experiments, runs, registered models, aliases) is MLflow writing into a real sqlite store
    as before.
    """
    global _template
    if _template is None or not _template.is_file():
        folder = Path(tempfile.mkdtemp(prefix="mlcal-test-store-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = folder / "empty.db"
        mlflow.MlflowClient(tracking_uri=f"sqlite:///{template}").search_experiments()
        _template = template
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists: a new store needs a new path")
    shutil.copyfile(_template, path)
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = 0",
                       (os.path.join(os.path.abspath(Path(cwd or ".") / "mlruns"), "0"),))
    finally:
        db.close()
    return f"sqlite:///{path}"


@contextmanager
def sqlite_store(root: Path, experiment: str, artifacts: str = "a") -> Iterator[str]:
    """Track into ``root/mlflow.db`` with ``experiment`` (artifacts under ``root/artifacts``)
    as the active experiment; yields the tracking URI. On exit the previous tracking URI, the
    active experiment and the MLflow environment variables are restored, so that other test
    modules see no trace of this store."""
    previous = mlflow.get_tracking_uri()
    saved_env = {k: os.environ.get(k) for k in _MLFLOW_ENV}
    uri = new_sqlite_db(root / "mlflow.db")
    mlflow.set_tracking_uri(uri)
    exp = mlflow.create_experiment(experiment, artifact_location=(root / artifacts).as_uri())
    mlflow.set_experiment(experiment_id=exp)
    try:
        yield uri
    finally:
        mlflow.set_tracking_uri(previous)
        mlflow.tracking.fluent._active_experiment_id = None
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
