"""Run ``mlflow models serve`` locally for tests and benchmarks (a test harness, not mlcal API).

The server is the real MLflow scoring server (uvicorn + FastAPI), started with the ``mlflow``
executable of the running interpreter and ``--env-manager local`` (no virtualenv, no network),
bound to 127.0.0.1 by default, and stopped by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except OSError:
        return False


class LocalServer:
    """``mlflow models serve -m MODEL_URI --env-manager local`` in a child process.

    Parameters
    ----------
    model_uri : str
        Any model URI MLflow can serve (a local directory, ``runs:/``, ``models:/``; set
        ``MLFLOW_TRACKING_URI`` in ``env`` for registry URIs).
    host : str, default="127.0.0.1"
    port : int, optional
        A free port is picked when omitted.
    workers : int, default=1
    startup_timeout : float, default=180
        Seconds to wait for ``/ping`` to answer 200.
    env : dict, optional
        Extra environment variables for the server.
    log_path : str, optional
        Where the server's output goes (a temporary file by default; see :attr:`log_path`).

    Examples
    --------
    >>> with LocalServer("/tmp/model") as server:            # doctest: +SKIP
    ...     requests.post(server.url + "/invocations", json={"inputs": [...]})
    """

    def __init__(self, model_uri: str, *, host: str = "127.0.0.1", port: int | None = None,
                 workers: int = 1, startup_timeout: float = 180.0, env: dict | None = None,
                 log_path: str | None = None):
        self.model_uri = str(model_uri)
        self.host = host
        self.port = port or free_port(host)
        self.workers = workers
        self.startup_timeout = startup_timeout
        self.extra_env = dict(env or {})
        self.log_path = log_path or tempfile.mkstemp(prefix="mlcal-serve-", suffix=".log")[1]
        self.proc: subprocess.Popen | None = None
        self.children: list[int] = []
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        """``http://host:port``."""
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the ``mlflow models serve`` process."""
        return None if self.proc is None else self.proc.pid

    def log_tail(self, n: int = 3000) -> str:
        """The last ``n`` characters of the server's output."""
        try:
            return Path(self.log_path).read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def start(self) -> "LocalServer":
        """Start the server and block until ``/ping`` answers (``RuntimeError`` otherwise)."""
        bin_dir = Path(sys.executable).parent
        exe = bin_dir / "mlflow"
        if not exe.exists():
            raise RuntimeError(f"no mlflow executable next to {sys.executable}")
        env = {**os.environ, **self.extra_env}
        # the server execs `uvicorn` through bash: it must be on PATH (the interpreter's bin)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        t0 = time.monotonic()
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(exe), "models", "serve", "-m", self.model_uri, "--env-manager", "local",
                 "--host", self.host, "--port", str(self.port), "--workers", str(self.workers)],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        self.children = _children(self.proc.pid)
        return self

    def _wait_ready(self, t0: float) -> None:
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow models serve exited with code {self.proc.returncode}:"
                                   f"\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/ping", timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, socket.timeout):
                pass
            if time.monotonic() - t0 > self.startup_timeout:
                raise RuntimeError(f"the server did not answer /ping within "
                                   f"{self.startup_timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server by PID, wait, and make sure its uvicorn child is gone too."""
        if self.proc is None:
            return
        children = self.children or _children(self.proc.pid)
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        # uvicorn is started with PR_SET_PDEATHSIG and exits with its parent; check by PID
        for child in children:
            deadline = time.monotonic() + 10
            while pid_alive(child) and time.monotonic() < deadline:
                time.sleep(0.1)
            if pid_alive(child):
                os.kill(child, signal.SIGKILL)
        self.children = children

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
