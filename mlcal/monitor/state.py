"""The state the monitoring loop (``mlcal monitor``) keeps between batches.

Two files:

* ``STATE.json``: the :class:`~mlcal.monitor.CalibrationMonitor` state plus what the loop needs
  (the monitored model's name and resolved version, the MLflow run its metrics go to, the step
  counter, the sidecar's name and SHA-256, and a SHA-256 of the document itself);
* ``STATE.json.window-<step>.npz``: the recent window, the rows of the last ``window_batches``
  batches (numeric feature columns, the model's calibrated probability, its base model's
  uncalibrated score, the 0/1 label, the weight and the monitor batch number of each row), from
  which a candidate is built on an alarm.

Crash safety: the sidecar of a step is a new file, written atomically before the JSON that names
it; the JSON is replaced atomically; only then is the previous sidecar removed. A process killed
at any point leaves a consistent pair (old or new). Loading never runs code (strict JSON,
``np.load(allow_pickle=False)``); a document or sidecar that was edited is refused by name
(its digest no longer matches).
"""

from __future__ import annotations

import hashlib
import io
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from mlcal.monitor.sequential import CalibrationMonitor

# written in every STATE.json: a format name, so it stays as it was when the loop module moved
STATE_FORMAT = "mlcal.monitor_loop"
STATE_VERSION = 1
WINDOW_ARRAYS = ("X", "columns", "p", "s", "y", "w", "batch")
_FIELDS = {"format", "version", "model_name", "model_version", "run_id", "step",
           "window_batches", "window_file", "window_sha256", "last", "monitor", "digest"}


class StateError(ValueError):
    """A loop state file that is missing a field, edited, or inconsistent with its sidecar."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _doc_digest(doc: dict) -> str:
    from mlcal._safe_json import dumps_safe

    body = {k: v for k, v in doc.items() if k != "digest"}
    return _digest(dumps_safe(body, nonfinite="error").encode())


@dataclass
class Window:
    """The recent rows kept for building a candidate (see the module docstring)."""

    columns: list[str]
    X: np.ndarray
    p: np.ndarray
    s: np.ndarray
    y: np.ndarray
    w: np.ndarray
    batch: np.ndarray

    @classmethod
    def empty(cls, columns: list[str]) -> "Window":
        z = np.zeros(0)
        return cls(list(columns), np.zeros((0, len(columns))), z, z.copy(), z.astype(np.int8),
                   z.copy(), z.astype(np.int64))

    def append(self, X, p, s, y, w, batch: int, keep_batches: int) -> "Window":
        """This window plus one batch, keeping the rows of the last ``keep_batches`` batches."""
        out = Window(self.columns, np.vstack([self.X, X]), np.concatenate([self.p, p]),
                     np.concatenate([self.s, s]), np.concatenate([self.y, y]).astype(np.int8),
                     np.concatenate([self.w, w]),
                     np.concatenate([self.batch, np.full(len(p), batch, dtype=np.int64)]))
        return out.since(batch - keep_batches + 1)

    def since(self, first_batch: int) -> "Window":
        """The rows of batches ``first_batch`` and later."""
        k = self.batch >= first_batch
        return Window(self.columns, self.X[k], self.p[k], self.s[k], self.y[k], self.w[k],
                      self.batch[k])

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, X=self.X, columns=np.array(self.columns, dtype=str), p=self.p, s=self.s,
                 y=self.y, w=self.w, batch=self.batch)
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> "Window":
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                if sorted(z.files) != sorted(WINDOW_ARRAYS):
                    raise StateError(f"{where}: expected arrays {list(WINDOW_ARRAYS)}, found "
                                     f"{sorted(z.files)}")
                a = {k: z[k] for k in WINDOW_ARRAYS}
        except StateError:
            raise
        except Exception as exc:  # a corrupt archive, object arrays (pickle refused), ...
            raise StateError(f"{where}: not a readable window archive ({exc})") from None
        n = a["p"].shape[0]
        if (a["X"].ndim != 2 or a["X"].shape != (n, a["columns"].shape[0])
                or any(a[k].shape != (n,) for k in ("s", "y", "w", "batch"))):
            raise StateError(f"{where}: array shapes disagree")
        return cls([str(c) for c in a["columns"]], a["X"].astype(np.float64), a["p"], a["s"],
                   a["y"], a["w"], a["batch"])


@dataclass
class LoopState:
    """What ``mlcal monitor`` keeps between runs (see the module docstring)."""

    model_name: str
    model_version: str
    run_id: str | None
    step: int
    window_batches: int
    monitor: CalibrationMonitor
    window: Window
    extra: dict[str, Any] = field(default_factory=dict)

    # --------------------------------------------------------------- writing
    def save(self, path: str) -> None:
        """Write the sidecar, then the JSON naming it (both atomic), then drop the old
        sidecar."""
        from mlcal._atomic import write_atomic, write_json

        path = os.path.abspath(path)
        previous = _sidecar_named(path)
        blob = self.window.to_bytes()
        sidecar = f"{path}.window-{self.step}.npz"
        write_atomic(sidecar, blob, overwrite=True)
        doc = {"format": STATE_FORMAT, "version": STATE_VERSION,
               "model_name": self.model_name, "model_version": self.model_version,
               "run_id": self.run_id, "step": self.step, "window_batches": self.window_batches,
               "window_file": os.path.basename(sidecar), "window_sha256": _digest(blob),
               "last": self.extra, "monitor": self.monitor.to_dict()}
        doc["digest"] = _doc_digest(doc)
        write_json(path, doc, overwrite=True, indent=None, nonfinite="error")
        if previous and previous != sidecar and os.path.exists(previous):
            os.remove(previous)

    # --------------------------------------------------------------- reading
    @classmethod
    def load(cls, path: str) -> "LoopState":
        """Read and check a state written by :meth:`save`; :class:`StateError` names what is
        wrong."""
        from mlcal._safe_json import loads_strict

        path = os.path.abspath(path)
        try:
            with open(path, "rb") as fh:
                doc = loads_strict(fh.read())
        except ValueError as exc:
            raise StateError(f"state file {path}: not a strict JSON document ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT:
            raise StateError(f"state file {path}: not an mlcal monitor-loop state (format "
                             f"{doc.get('format') if isinstance(doc, dict) else None!r})")
        if doc.get("version") != STATE_VERSION:
            raise StateError(f"state file {path}: version {doc.get('version')!r}, this mlcal "
                             f"reads version {STATE_VERSION}")
        if doc.get("digest") != _doc_digest(doc):
            raise StateError(f"state file {path}: its content does not match its digest (the "
                             "file was edited or damaged); refusing it. Start a new state file "
                             "or restore the previous one")
        missing = sorted(_FIELDS - set(doc))
        if missing:
            raise StateError(f"state file {path}: missing field(s) {missing}")
        sidecar = os.path.join(os.path.dirname(path), str(doc["window_file"]))
        if os.path.basename(sidecar) != doc["window_file"]:
            raise StateError(f"state file {path}: window_file must be a plain file name")
        try:
            with open(sidecar, "rb") as fh:
                blob = fh.read()
        except FileNotFoundError:
            raise StateError(f"state file {path}: its window file {sidecar} is missing") from None
        if _digest(blob) != doc["window_sha256"]:
            raise StateError(f"window file {sidecar}: its SHA-256 does not match the one recorded "
                             f"in {path} (the file was replaced or edited); refusing it")
        step, batches = doc["step"], doc["window_batches"]
        if not (isinstance(step, int) and step >= 0 and isinstance(batches, int) and batches > 0):
            raise StateError(f"state file {path}: step and window_batches must be counts")
        return cls(str(doc["model_name"]), str(doc["model_version"]), doc["run_id"], step,
                   batches, CalibrationMonitor.from_dict(doc["monitor"]),
                   Window.from_bytes(blob, sidecar), dict(doc.get("last") or {}))


def _sidecar_named(path: str) -> str | None:
    """The sidecar the JSON at ``path`` names now (None when there is no readable JSON)."""
    from mlcal._safe_json import loads_strict

    try:
        with open(path, "rb") as fh:
            doc = loads_strict(fh.read())
        return os.path.join(os.path.dirname(path), os.path.basename(str(doc["window_file"])))
    except (OSError, ValueError, KeyError, TypeError):
        return None
