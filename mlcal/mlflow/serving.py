"""``mlcal serve``: run ``mlflow models serve`` so that it works as printed.

``mlflow models serve`` starts its scoring server with ``bash -c "exec uvicorn ..."``, so it
fails with ``uvicorn: not found`` unless the interpreter's ``bin`` directory is on ``PATH``
(an un-activated virtual environment). :func:`serve` runs MLflow with the running
interpreter and that directory first on ``PATH``, prints the model's input columns (from its
signature) and a ready-to-run ``curl`` request whose body is the model's own saved serving
input example (or one row built from the signature), then waits for the server.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

ENV_MANAGERS = ("local", "virtualenv", "uv", "conda")
# a placeholder value per signature type, for a model saved without an input example
_PLACEHOLDERS = {"double": 0.0, "float": 0.0, "long": 0, "integer": 0, "boolean": False,
                 "string": "", "binary": "", "datetime": "1970-01-01T00:00:00"}


@dataclass(frozen=True)
class ServingRequest:
    """What a client needs to know to query the served model.

    Attributes
    ----------
    columns : list of (name, type)
        The signature's input columns (empty when the model has no column signature).
    body : str
        A JSON request body the server accepts.
    from_example : bool
        ``True``: ``body`` is the model's saved serving input example; ``False``: one row of
        placeholder values built from the signature.
    """

    columns: list[tuple[str, str]]
    body: str
    from_example: bool


def _signature_columns(info) -> list[tuple[str, str]]:
    sig = info.signature
    if sig is None or sig.inputs is None or not sig.inputs.has_input_names():
        return []
    return [(spec.name, getattr(spec.type, "name", str(spec.type))) for spec in sig.inputs.inputs]


def _saved_example(model_uri: str, info) -> str | None:
    """The model's ``serving_input_example.json`` as compact JSON, or None without one."""
    example_info = getattr(info, "saved_input_example_info", None) or {}
    if not example_info.get("serving_input_path"):
        return None
    from mlflow.models.utils import load_serving_example

    text = load_serving_example(model_uri)
    return json.dumps(json.loads(text), separators=(",", ":")) if text else None


def serving_request(model_uri: str) -> ServingRequest:
    """The input columns and a request body for ``model_uri`` (see :class:`ServingRequest`).

    Raises
    ------
    ValueError
        The model has neither a saved input example nor a column signature, so no request
        can be built for it.
    """
    import mlflow.models

    info = mlflow.models.get_model_info(model_uri)
    columns = _signature_columns(info)
    body = _saved_example(model_uri, info)
    if body is not None:
        return ServingRequest(columns, body, True)
    if not columns:
        raise ValueError(f"the model at {model_uri} has no input example and no column "
                         "signature; save it with input_example= to get a ready-made request")
    row = {name: _PLACEHOLDERS.get(kind) for name, kind in columns}
    return ServingRequest(columns, json.dumps({"dataframe_records": [row]},
                                              separators=(",", ":")), False)


def curl_command(url: str, body: str) -> str:
    """A shell-ready ``curl`` POST of ``body`` to ``url/invocations``."""
    return (f"curl -s -X POST {url}/invocations -H 'Content-Type: application/json' "
            f"-d {shlex.quote(body)}")


def server_environment(base: dict | None = None) -> dict:
    """``base`` (default ``os.environ``) with the running interpreter's ``bin`` directory first
    on ``PATH``, where ``uvicorn`` and ``mlflow`` of this environment live."""
    env = dict(os.environ if base is None else base)
    bin_dir = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join([bin_dir, *(p for p in env.get("PATH", "").split(os.pathsep)
                                              if p and p != bin_dir)])
    return env


def server_command(model_uri: str, host: str, port: int, env_manager: str,
                   workers: int = 1) -> list[str]:
    """``mlflow models serve`` run by the current interpreter."""
    if env_manager not in ENV_MANAGERS:
        raise ValueError(f"env_manager must be one of {ENV_MANAGERS}, got {env_manager!r}")
    return [sys.executable, "-m", "mlflow", "models", "serve", "-m", model_uri,
            "--host", host, "--port", str(port), "--env-manager", env_manager,
            "--workers", str(workers)]


def _client_host(host: str) -> str:
    """Where a client on this machine reaches a server bound to ``host``."""
    if host in ("0.0.0.0", "", "*"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _port_taken(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _ping(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=2) as resp:
            return resp.status == 200
    except (urllib.error.URLError, ConnectionError, OSError):
        return False


def serve(model_uri: str, *, host: str = "127.0.0.1", port: int = 5000,
          env_manager: str = "local", workers: int = 1, startup_timeout: float = 600.0,
          out: Callable[[str], None] = print) -> int:
    """Serve ``model_uri`` with ``mlflow models serve`` until the server stops (or this process
    gets SIGINT/SIGTERM, which it passes on); returns the server's exit code.

    Prints the input columns and a ``curl`` request before starting, and ``ready`` once the
    server answers ``/ping``.

    Parameters
    ----------
    model_uri : str
        Any model URI MLflow serves (a local directory, ``runs:/``, ``models:/``).
    host : str, default="127.0.0.1"
        Interface to bind (``0.0.0.0`` exposes the server to the network).
    port : int, default=5000
    env_manager : {"local", "virtualenv", "uv", "conda"}, default="local"
        ``"local"`` serves from this environment; the others rebuild the model's logged
        environment first (minutes, needs a package index).
    workers : int, default=1
    startup_timeout : float, default=600
        Seconds to wait for ``/ping`` before giving up (the server is then stopped).
    """
    request = serving_request(model_uri)
    command = server_command(model_uri, host, port, env_manager, workers)
    if _port_taken(host, port):
        raise OSError(f"port {port} on {host} is already in use; pick another with --port")
    url = f"http://{_client_host(host)}:{port}"
    if request.columns:
        out("input columns: " + ", ".join(f"{n} ({t})" for n, t in request.columns))
    source = "the model's input example" if request.from_example else \
        "placeholder values from the signature"
    out(f"request ({source}):")
    out(f"  {curl_command(url, request.body)}")
    out(f"starting: {shlex.join(command)}")
    proc = subprocess.Popen(command, env=server_environment())

    def forward(signum, frame):
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        start = time.monotonic()
        while proc.poll() is None and not _ping(url):
            if time.monotonic() - start > startup_timeout:
                out(f"the server did not answer {url}/ping within {startup_timeout:.0f} s; "
                    "stopping it")
                proc.terminate()
                break
            time.sleep(0.25)
        else:
            if proc.poll() is None:
                out(f"ready: {url} (Ctrl-C stops it)")
        return proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
