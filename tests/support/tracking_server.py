"""Run a real ``mlflow server`` (sqlite registry) on 127.0.0.1 for tests, stopped by its PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from support.serving import _children, free_port, pid_alive


class TrackingServer:
    """``mlflow server`` with a sqlite backend and local artifacts under ``root``, one worker.

    ``env`` adds variables to the server's environment (e.g. the webhook settings)."""

    def __init__(self, root: Path, env: dict | None = None, startup_timeout: float = 180.0):
        self.root = Path(root)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.log_path = self.root / "mlflow-server.log"
        self.proc: subprocess.Popen | None = None
        self.children: list[int] = []

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def start(self) -> "TrackingServer":
        """Launch the server and wait until ``/health`` answers."""
        return self.launch().wait_ready()

    def launch(self) -> "TrackingServer":
        """Start the process without waiting (see :meth:`wait_ready`)."""
        bin_dir = Path(sys.executable).parent
        env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
        env.update(self.env)
        env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [str(bin_dir / "mlflow"), "server",
                 "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                 "--default-artifact-root", str(self.root / "artifacts"),
                 "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root)
        self._started = time.monotonic()
        return self

    def wait_ready(self) -> "TrackingServer":
        """Block until ``/health`` answers 200 (``RuntimeError`` if the server exits or does
        not answer within ``startup_timeout`` seconds of its launch)."""
        deadline = self._started + self.startup_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        self.children = _children(self.proc.pid)
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"mlflow server not up within {self.startup_timeout} s:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        for child in self.children:   # its uvicorn, by PID
            deadline = time.monotonic() + 10
            while pid_alive(child) and time.monotonic() < deadline:
                time.sleep(0.1)
            if pid_alive(child):
                os.kill(child, signal.SIGKILL)
