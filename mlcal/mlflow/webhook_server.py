"""``mlcal gate-server``: receive MLflow registry webhooks and gate each new model version.

MLflow (3.3+) POSTs a signed delivery to a webhook's URL when a model version is created
(event ``model_version.created``). :class:`GateServer` is a small HTTP receiver (standard
library ``http.server``) that

1. authenticates every delivery (:class:`~mlcal.mlflow.webhook_auth.WebhookVerifier`: HMAC
   signature, timestamp window, replayed delivery ids refused), after refusing a missing or
   oversized body before reading it;
2. parses the body strictly (:func:`mlcal._safe_json.loads_strict`);
3. for ``model_version.created`` of a configured model, queues the version and answers
   ``202`` at once; other events and models are acknowledged (``200``) and ignored;
4. runs the gate (:func:`mlcal.mlflow.gate.promote`, through the ``run_gate`` callable) on
   one worker thread per model, so versions of one model are gated one at a time in arrival
   order, each queue bounded (a full queue answers ``503`` with ``Retry-After``, which
   MLflow retries with the same delivery id, so that id is released again).

The gate runs after the answer because MLflow's delivery times out after
``MLFLOW_WEBHOOK_REQUEST_TIMEOUT`` seconds (30 by default) and retries timeouts and 5xx
answers (``MLFLOW_WEBHOOK_REQUEST_MAX_RETRIES``, 3 by default), while a gate that loads two
models and bootstraps can take longer.

Every request and every gate outcome is written as one JSON line (:class:`EventLog`), e.g.
``{"time": ..., "kind": "request", "outcome": "refused", "status": 403, "reason":
"bad-signature", ...}``; the secret and the signature never are.
"""

from __future__ import annotations

import json
import queue
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import IO, Any, Callable, Iterable

from mlcal._safe_json import dumps_safe, loads_strict
from mlcal.mlflow.gate_journal import utc_now
from mlcal.mlflow.webhook_auth import (DEFAULT_MAX_AGE, DELIVERY_ID_HEADER, WebhookRefused,
                                       WebhookVerifier)

#: The event that triggers a gate, as MLflow names it in a payload (``entity``, ``action``).
MODEL_VERSION_CREATED = ("model_version", "created")
DEFAULT_PATH = "/mlflow-webhook"
#: MLflow's model_version.created payloads are well under 10 KB (name, version, source, run id,
#: tags, description); the limit bounds what an unauthenticated client can make us read.
DEFAULT_MAX_BODY = 256 * 1024
DEFAULT_QUEUE_SIZE = 16
#: Seconds each read from a connection may wait (a silent client is cut off).
REQUEST_TIMEOUT = 10.0
#: At most this much of a refused, unread body (and for at most this long) is discarded before
#: the connection closes.
LINGER_BYTES = 1024 * 1024
LINGER_SECONDS = 3.0
#: Connections served at once (one thread each); more are closed at once and logged.
MAX_CONNECTIONS = 64


class EventLog:
    """Structured log: one JSON object per line, each with a UTC ``time``; thread-safe.

    Parameters
    ----------
    stream : file-like, optional
        Where lines go (default ``sys.stderr``).
    path : str, optional
        Append to this file instead (opened line-buffered, UTF-8).
    """

    def __init__(self, stream: IO[str] | None = None, path: str | None = None):
        self._own = path is not None
        self._stream = open(path, "a", encoding="utf-8", buffering=1) if self._own \
            else (stream or sys.stderr)
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> dict:
        """Write one line ``{"time", "kind", **fields}`` and return it."""
        entry = {"time": utc_now(), "kind": kind, **fields}
        line = dumps_safe(entry)
        with self._lock:
            if not self._stream.closed:   # a gate still finishing after stop() is not lost
                self._stream.write(line + "\n")
                self._stream.flush()
            else:
                sys.stderr.write(line + "\n")
        return entry

    def close(self) -> None:
        """Close the log file (a stream given by the caller is left open)."""
        if self._own:
            with self._lock:
                self._stream.close()


@dataclass
class GateJob:
    """One version waiting for the gate."""

    model_name: str
    version: str
    delivery_id: str
    queued_at: float = field(default_factory=time.time)


class QueueFull(Exception):
    """The model's gate queue is at its bound."""


class GateWorkers:
    """One bounded queue and one worker thread per model: versions of a model are gated one at
    a time, in arrival order; different models in parallel.

    Parameters
    ----------
    run_gate : callable
        ``run_gate(model_name, version)`` runs the gate and returns its decision (an object
        with ``as_dict()``, e.g. :class:`~mlcal.mlflow.gate.GateDecision`).
    models : iterable of str
    log : EventLog
    queue_size : int, default=16
        Versions that may wait per model (the one being gated not counted).
    """

    def __init__(self, run_gate: Callable[[str, str], Any], models: Iterable[str],
                 log: EventLog, queue_size: int = DEFAULT_QUEUE_SIZE):
        if isinstance(queue_size, bool) or not isinstance(queue_size, int) or queue_size < 1:
            raise ValueError(f"queue_size must be a positive integer, got {queue_size!r}")
        self._run_gate, self._log = run_gate, log
        self._queues = {m: queue.Queue(maxsize=queue_size) for m in models}
        self._pending: set[tuple[str, str]] = set()    # queued or running
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.outcomes: list[dict] = []                  # every finished gate, in order
        self._threads = [threading.Thread(target=self._work, args=(m,), daemon=True,
                                          name=f"mlcal-gate-{m}") for m in self._queues]
        for t in self._threads:
            t.start()

    def submit(self, job: GateJob) -> str:
        """Queue ``job``; returns ``"queued"``, or ``"already-queued"`` when the same version
        is queued or being gated. Raises :class:`QueueFull`."""
        key = (job.model_name, job.version)
        with self._lock:
            if key in self._pending:
                return "already-queued"
            try:
                self._queues[job.model_name].put_nowait(job)
            except queue.Full:
                raise QueueFull(f"{self._queues[job.model_name].maxsize} versions of "
                                f"{job.model_name!r} are already waiting for the gate") from None
            self._pending.add(key)
        return "queued"

    def depth(self) -> int:
        """Versions queued or being gated."""
        with self._lock:
            return len(self._pending)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no version is queued or being gated; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self._pending, timeout)

    def _work(self, model: str) -> None:
        q = self._queues[model]
        while True:
            job = q.get()
            if job is None:
                return
            started = time.time()
            fields = {"model": job.model_name, "version": job.version,
                      "delivery_id": job.delivery_id,
                      "waited_seconds": round(started - job.queued_at, 3)}
            try:
                decision = self._run_gate(job.model_name, job.version).as_dict()
                failed = [c["name"] for c in decision["criteria"] if c["passed"] is False]
                entry = self._log.write(
                    "gate", outcome=decision["result"], alias=decision["alias"],
                    holder_version=decision["holder_version"],
                    compared_to=decision["compared_to"], failed_criteria=failed,
                    seconds=round(time.time() - started, 3), **fields)
            except Exception as exc:   # a failed gate is logged; the worker goes on
                entry = self._log.write("gate", outcome="error", error=type(exc).__name__,
                                        message=str(exc)[:2000],
                                        seconds=round(time.time() - started, 3), **fields)
            with self._idle:
                self.outcomes.append(entry)
                self._pending.discard((job.model_name, job.version))
                self._idle.notify_all()

    def close(self, timeout: float = 30.0) -> None:
        """Let the queued gates finish (up to ``timeout`` seconds each thread), then stop."""
        for q in self._queues.values():
            q.put(None)
        for t in self._threads:
            t.join(timeout)


class _BoundedHTTPServer(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once."""

    daemon_threads = True

    def __init__(self, address, handler, app: "GateServer", max_connections: int):
        super().__init__(address, handler)
        self.app = app
        self._slots = threading.BoundedSemaphore(max_connections)

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False):
            self.app.log.write("request", peer=client_address[0], status=None,
                               outcome="refused", reason="too-many-connections",
                               detail="connection closed unread: all connection slots busy")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Handler(BaseHTTPRequestHandler):
    server_version = "mlcal-gate-server"
    sys_version = ""
    timeout = REQUEST_TIMEOUT

    def log_request(self, code="-", size="-"):
        pass   # the handlers below log each request as a structured line

    def log_message(self, format, *args):   # noqa: A002 (http.server's name)
        pass

    def log_error(self, format, *args):     # noqa: A002
        # http.server's own refusals (bad request line, unsupported method, timeout);
        # send_error reports its status as the first argument of "code %d, message %s"
        status = args[0] if format.startswith("code %d") and args else None
        self.server.app.log.write(
            "request", method=getattr(self, "command", None), peer=self.client_address[0],
            path=(getattr(self, "path", None) or "")[:200] or None, status=status,
            outcome="refused", reason="bad-request", detail=(format % args)[:500])

    def _answer(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = (json.dumps(body) + "\n").encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):   # noqa: N802
        app: GateServer = self.server.app
        ok = self.path == "/health"
        app.log.write("request", method="GET", path=self.path[:200],
                      peer=self.client_address[0], status=200 if ok else 404,
                      outcome="health" if ok else "refused",
                      **({} if ok else {"reason": "unknown-path"}))
        if ok:
            self._answer(200, {"status": "ok", "pending_gates": app.workers.depth()})
        else:
            self._answer(404, {"error": "unknown-path"})

    def do_POST(self):  # noqa: N802
        app: GateServer = self.server.app
        status, body, extra, fields = app.handle_post(self.path, self.headers, self.rfile)
        # logged before the answer: whoever got the answer can read its line
        app.log.write("request", method="POST", path=self.path[:200],
                      peer=self.client_address[0], status=status, **fields)
        self._answer(status, body, extra)
        if "body_bytes" not in fields:
            self._lingering_close()

    def _lingering_close(self) -> None:
        """The body was refused unread: stop sending, then discard (boundedly) what the client
        still sends, so that closing with unread data does not reset the connection before
        the client has read the refusal."""
        self.close_connection = True
        deadline = time.monotonic() + LINGER_SECONDS
        try:
            self.connection.shutdown(socket.SHUT_WR)
            budget = LINGER_BYTES
            while budget > 0 and time.monotonic() < deadline:
                self.connection.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = self.connection.recv(min(65536, budget))
                if not chunk:
                    break
                budget -= len(chunk)
        except OSError:
            pass


class GateServer:
    """The webhook receiver: HTTP server, verifier and gate workers (module docstring).

    Parameters
    ----------
    secret : str or bytes
        The webhook's HMAC secret (the same given to ``create_webhook``).
    models : iterable of str
        Registered model names whose new versions are gated; others are ignored.
    run_gate : callable
        ``run_gate(model_name, version) -> GateDecision``; see :func:`gate_runner`.
    host : str, default="127.0.0.1"
    port : int, default=0
        0 picks a free port (see :attr:`url`).
    path : str, default="/mlflow-webhook"
        The POST endpoint; every other path answers 404.
    max_age : float, default=300
        Timestamp window, seconds.
    max_body : int, default=262144
        Largest accepted body in bytes (refused with 413 before it is read).
    queue_size : int, default=16
        Versions that may wait per model.
    max_connections : int, default=64
        Connections served at once; more are closed unread (and logged).
    log : EventLog, optional
        Default: JSON lines on stderr.
    """

    def __init__(self, secret: str | bytes, models: Iterable[str],
                 run_gate: Callable[[str, str], Any], *, host: str = "127.0.0.1",
                 port: int = 0, path: str = DEFAULT_PATH, max_age: float = DEFAULT_MAX_AGE,
                 max_body: int = DEFAULT_MAX_BODY, queue_size: int = DEFAULT_QUEUE_SIZE,
                 max_connections: int = MAX_CONNECTIONS, log: EventLog | None = None):
        self.models = frozenset(models)
        if not self.models:
            raise ValueError("no model names given: the server would gate nothing")
        if not path.startswith("/"):
            raise ValueError(f"path must start with '/', got {path!r}")
        if isinstance(max_body, bool) or not isinstance(max_body, int) or max_body < 1:
            raise ValueError(f"max_body must be a positive integer, got {max_body!r}")
        self.verifier = WebhookVerifier(secret, max_age=max_age)
        self.path, self.max_body = path, max_body
        self.log = log or EventLog()
        self.workers = GateWorkers(run_gate, self.models, self.log, queue_size)
        self.httpd = _BoundedHTTPServer((host, port), _Handler, self, max_connections)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port/path`` of the endpoint."""
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{self.path}"

    def handle_post(self, path: str, headers, rfile) -> tuple[int, dict, dict, dict]:
        """Decide on one POST: ``(status, answer body, extra headers, log fields)``."""
        fields: dict[str, Any] = {"delivery_id": (headers.get(DELIVERY_ID_HEADER) or "")[:128]
                                  or None}

        def refuse(status: int, reason: str, message: str, extra: dict | None = None):
            fields.update(outcome="refused", reason=reason, detail=message)
            return status, {"error": reason, "detail": message}, extra or {}, fields

        if path != self.path:
            return refuse(404, "unknown-path", f"POST to {path[:200]!r}; the endpoint is "
                                               f"{self.path!r}")
        if headers.get("Transfer-Encoding"):
            return refuse(411, "no-length", "chunked bodies are not accepted; send "
                                            "Content-Length")
        length = headers.get("Content-Length")
        if length is None:
            return refuse(411, "no-length", "the request has no Content-Length")
        try:
            n = int(length)
        except ValueError:
            return refuse(400, "bad-length", f"Content-Length is not an integer: "
                                             f"{length[:40]!r}")
        if n < 0:
            return refuse(400, "bad-length", f"Content-Length is negative: {n}")
        if n > self.max_body:
            return refuse(413, "too-large", f"body of {n} bytes is over the {self.max_body}-"
                                            "byte limit")
        body = rfile.read(n)
        fields["body_bytes"] = len(body)
        if len(body) != n:
            return refuse(400, "short-body", f"{len(body)} of {n} bytes arrived")
        try:
            delivery = self.verifier.verify(headers, body)
        except WebhookRefused as exc:
            return refuse(exc.status, exc.reason, str(exc),
                          {"Retry-After": "5"} if exc.status == 503 else None)
        try:
            doc = loads_strict(body, max_bytes=self.max_body)
        except ValueError as exc:
            return refuse(400, "bad-json", f"the body is not valid JSON: {exc}")
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, dict) or not isinstance(doc.get("entity"), str) \
                or not isinstance(doc.get("action"), str):
            return refuse(400, "bad-payload", "the body is not an MLflow webhook payload "
                                              "(an object with entity, action and data)")
        event = (doc["entity"], doc["action"])
        fields["event"] = ".".join(event)
        if event != MODEL_VERSION_CREATED:
            fields.update(outcome="ignored", reason="other-event")
            return 200, {"result": "ignored", "reason": f"event {fields['event']} is not "
                                                        "gated"}, {}, fields
        name, version = data.get("name"), data.get("version")
        fields["model"] = name if isinstance(name, str) else None
        if name not in self.models:
            fields.update(outcome="ignored", reason="other-model")
            return 200, {"result": "ignored", "reason": "model is not gated here"}, {}, fields
        if not isinstance(version, str) or not (version.isascii() and version.isdigit()) \
                or len(version) > 18:
            return refuse(400, "bad-payload", f"version is not a version number: "
                                              f"{str(version)[:40]!r}")
        fields["version"] = version
        try:
            state = self.workers.submit(GateJob(name, version, delivery.delivery_id))
        except QueueFull as exc:
            # not processed: MLflow retries a 503 with the same delivery id, which must pass
            self.verifier.replay_guard.release(delivery.delivery_id)
            return refuse(503, "queue-full", str(exc), {"Retry-After": "30"})
        fields.update(outcome="accepted", reason=state)
        return 202, {"result": state, "model": name, "version": version}, {}, fields

    def start(self) -> "GateServer":
        """Serve in a background thread; returns self."""
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True,
                                        name="mlcal-gate-server")
        self._thread.start()
        self.log.write("start", url=self.url, models=sorted(self.models),
                       max_age=self.verifier.max_age, max_body=self.max_body)
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until :meth:`stop` (or KeyboardInterrupt)."""
        self.log.write("start", url=self.url, models=sorted(self.models),
                       max_age=self.verifier.max_age, max_body=self.max_body)
        try:
            self.httpd.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            self._close()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until no gate is queued or running; False on timeout."""
        return self.workers.wait_idle(timeout)

    def stop(self) -> None:
        """Stop answering, let queued gates finish, close the log."""
        self.httpd.shutdown()
        if self._thread is not None:
            self._thread.join(10)
        self._close()

    def _close(self) -> None:
        self.httpd.server_close()
        self.workers.close()
        self.log.write("stop")
        self.log.close()

    def __enter__(self) -> "GateServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def gate_runner(*, alias: str, data, label_column: str = "y",
                **promote_kwargs: Any) -> Callable[[str, str], Any]:
    """``run_gate(model_name, version)`` for :class:`GateServer`: :func:`mlcal.mlflow.gate.
    promote` of that version to ``alias`` on ``data`` with the given policy arguments (those
    of ``promote``: ``max_ece``, ``max_log_loss_increase``, ``confidence``, ...)."""
    from mlcal.mlflow.gate import promote

    def run_gate(model_name: str, version: str):
        return promote(model_name, version, alias=alias, data=data, label_column=label_column,
                       **promote_kwargs)

    return run_gate


def read_evaluation_data(path: str, label_column: str):
    """The evaluation rows of a ``.csv`` or ``.parquet`` file as a DataFrame, read once at
    start-up; raises ``ValueError`` when the label column is missing or the file is empty."""
    import pandas as pd

    lower = str(path).lower()
    if lower.endswith((".parquet", ".pq")):
        frame = pd.read_parquet(path)
    elif lower.endswith(".csv"):
        frame = pd.read_csv(path)
    else:
        raise ValueError(f"evaluation data {path!r} is neither .csv nor .parquet")
    if label_column not in frame.columns:
        raise ValueError(f"evaluation data {path!r} has no label column {label_column!r}; "
                         f"columns are {list(frame.columns)[:20]}")
    if len(frame) == 0:
        raise ValueError(f"evaluation data {path!r} has no rows")
    return frame


def read_secret(*, env: str | None = None, file: str | None = None,
                environ: dict | None = None) -> str:
    """The webhook secret from an environment variable or a file (one of the two; a file's
    trailing newline is dropped). Raises ``ValueError`` when it is missing or empty."""
    import os

    if (env is None) == (file is None):
        raise ValueError("give the secret's environment variable or its file, exactly one")
    if env is not None:
        secret = (os.environ if environ is None else environ).get(env, "")
        where = f"environment variable {env}"
    else:
        with open(file, encoding="utf-8") as fh:
            secret = fh.read().rstrip("\r\n")
        where = f"file {file}"
    if not secret:
        raise ValueError(f"the webhook secret ({where}) is unset or empty")
    return secret


def register_webhook(url: str, secret: str, *, name: str = "mlcal-gate", client=None,
                     description: str = "mlcal gate-server: gate new model versions"):
    """Create, or update in place, the MLflow webhook named ``name`` so that it sends
    ``model_version.created`` to ``url`` signed with ``secret``; returns the webhook.

    The MLflow server must allow the URL: by default it delivers only to ``https`` URLs of
    public addresses (``MLFLOW_WEBHOOK_ALLOWED_SCHEMES``, ``MLFLOW_WEBHOOK_ALLOW_PRIVATE_IPS``
    in the server's environment; see docs/webhooks.md)."""
    from mlflow import MlflowClient

    client = client or MlflowClient()
    token = None
    while True:
        page = client.list_webhooks(max_results=100, page_token=token)
        existing = next((w for w in page if w.name == name), None)
        if existing is not None or not page.token:
            break
        token = page.token
    events = ["model_version.created"]
    if existing is not None:
        return client.update_webhook(existing.webhook_id, url=url, events=events,
                                     secret=secret, status="ACTIVE", description=description)
    return client.create_webhook(name=name, url=url, events=events, secret=secret,
                                 description=description)
