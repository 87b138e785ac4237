"""Headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``:
commands on fd 3, replies and events on fd 4, NUL-separated JSON), with no extra packages.

:func:`render_page` loads one file and returns what a person would want checked: every console
message with its level, uncaught exceptions, log entries (failed resource loads land there),
every network request the page made, and a full-page PNG screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass
class PageResult:
    console: list[dict] = field(default_factory=list)      # {"level", "text"}
    exceptions: list[str] = field(default_factory=list)
    log_entries: list[dict] = field(default_factory=list)  # {"level", "source", "text", "url"}
    requests: list[str] = field(default_factory=list)      # URLs the page asked for
    screenshot: bytes = b""
    page_height: int = 0
    figure_boxes: list[dict] = field(default_factory=list)  # svg.figure bounding boxes

    def errors(self) -> list[str]:
        """Console errors/warnings, uncaught exceptions and error/warning log entries."""
        out = [f"console.{c['level']}: {c['text']}" for c in self.console
               if c["level"] in ("error", "warning", "assert")]
        out += [f"exception: {e}" for e in self.exceptions]
        out += [f"log {e['level']} ({e['source']}): {e['text']} {e.get('url', '')}"
                for e in self.log_entries if e["level"] in ("error", "warning")]
        return out


class _Pipe:
    def __init__(self, proc, write_fd: int, read_fd: int):
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30.0) -> dict:
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.write_fd, json.dumps(msg).encode() + b"\0")
        want = self.next_id
        deadline = time.monotonic() + timeout
        while True:
            for m in self._read(deadline):
                if m.get("id") == want:
                    if "error" in m:
                        raise RuntimeError(f"{method}: {m['error']}")
                    return m.get("result", {})
                self.events.append(m)

    def wait_event(self, method: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.events):
                if m.get("method") == method:
                    return self.events.pop(i)
            self.events.extend(self._read(deadline))

    def drain(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        try:
            while True:
                self.events.extend(self._read(deadline))
        except TimeoutError:
            pass

    def _read(self, deadline: float) -> list[dict]:
        while b"\0" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no reply from chromium")
            ready, _, _ = select.select([self.read_fd], [], [], left)
            if ready:
                chunk = os.read(self.read_fd, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the pipe (exit {self.proc.poll()})")
                self.buffer += chunk
        *whole, self.buffer = self.buffer.split(b"\0")
        return [json.loads(w) for w in whole if w]


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are numbered >= 10, so that the child's dup2 onto 3 and 4 never
    overwrites one of them."""
    import fcntl

    ends = []
    for fd in os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(fd)
    return ends[0], ends[1]


def render_page(chromium: str, html_file: Path | str, *, width: int = 1280, height: int = 900,
                settle: float = 0.5, timeout: float = 60.0, workdir: Path | None = None,
                full_page: bool = True, wait_for: str | None = None,
                accept=None) -> PageResult:
    """Load ``html_file`` (a path, or a URL string) in a fresh headless Chromium and collect a
    :class:`PageResult`; the profile lives in ``workdir`` (default: the file's folder).
    ``wait_for``: a JavaScript expression polled after the load event until it is true (a page
    that fetches its content, e.g. the MLflow UI); ``accept``: a predicate on the PNG bytes, the
    page is captured again (same page, a second later) until it holds; ``TimeoutError`` after
    ``timeout``."""
    url = html_file if isinstance(html_file, str) else html_file.resolve().as_uri()
    workdir = workdir or Path(html_file).parent
    cmd_r, cmd_w = _high_pipe()     # we write commands, chromium reads fd 3
    out_r, out_w = _high_pipe()     # chromium writes fd 4, we read

    def child_fds():
        os.dup2(cmd_r, 3)
        os.dup2(out_w, 4)

    profile = workdir / f".chromium-profile-{os.getpid()}"
    proc = subprocess.Popen(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
         "--no-first-run", "--no-default-browser-check", "--disable-extensions",
         "--hide-scrollbars", f"--user-data-dir={profile}", f"--window-size={width},{height}",
         "about:blank"],
        pass_fds=(3, 4), preexec_fn=child_fds, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    os.close(cmd_r)
    os.close(out_w)
    pipe = _Pipe(proc, cmd_w, out_r)
    result = PageResult()
    try:
        target = pipe.send("Target.createTarget", {"url": "about:blank"}, timeout=timeout)
        session = pipe.send("Target.attachToTarget", {"targetId": target["targetId"],
                                                      "flatten": True})["sessionId"]
        for domain in ("Runtime", "Log", "Page", "Network"):
            pipe.send(f"{domain}.enable", session=session)
        pipe.send("Page.navigate", {"url": url}, session=session)
        pipe.wait_event("Page.loadEventFired", timeout=timeout)
        deadline = time.monotonic() + timeout

        def satisfied() -> bool:
            return wait_for is None or bool(pipe.send(
                "Runtime.evaluate", {"expression": wait_for, "returnByValue": True},
                session=session).get("result", {}).get("value"))

        while True:
            while not satisfied():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the page never satisfied {wait_for!r} in {timeout} s")
                pipe.drain(0.5)
            pipe.drain(settle)
            metrics = pipe.send("Page.getLayoutMetrics", session=session)
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            result.page_height = int(size["height"]) if full_page else height
            boxes = pipe.send("Runtime.evaluate", {
                "expression": "JSON.stringify([...document.querySelectorAll('svg.figure')].map("
                              "e => {const r = e.getBoundingClientRect(); return {x: r.x, "
                              "y: r.y + window.scrollY, width: r.width, height: r.height};}))",
                "returnByValue": True}, session=session)
            result.figure_boxes = json.loads(boxes["result"]["value"])
            shot = pipe.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": result.page_height,
                         "scale": 1}}, session=session, timeout=timeout)
            png = base64.b64decode(shot["data"])
            # a page that changes by itself (the MLflow UI refreshes its charts) may have left
            # the awaited state during the capture: keep a screenshot taken inside it
            if satisfied() and (accept is None or accept(png)):
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"no accepted screenshot of {url} in {timeout} s")
            pipe.drain(1.0)
        result.screenshot = png
        pipe.drain(0.1)
        for m in pipe.events:
            method, p = m.get("method"), m.get("params", {})
            if method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", "")))
                                for a in p.get("args", []))
                result.console.append({"level": p.get("type"), "text": text})
            elif method == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                result.exceptions.append(d.get("exception", {}).get("description")
                                         or d.get("text", ""))
            elif method == "Log.entryAdded":
                e = p.get("entry", {})
                result.log_entries.append({"level": e.get("level"), "source": e.get("source"),
                                           "text": e.get("text"), "url": e.get("url", "")})
            elif method == "Network.requestWillBeSent":
                result.requests.append(p.get("request", {}).get("url", ""))
        try:
            pipe.send("Browser.close", timeout=10)
        except (RuntimeError, TimeoutError):
            pass
    finally:
        os.close(cmd_w)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        os.close(out_r)
        shutil.rmtree(profile, ignore_errors=True)
    return result
