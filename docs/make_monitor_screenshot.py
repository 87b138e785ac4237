"""Screenshot the MLflow UI's charts of the month example: docs/img/monitor_month_mlflow_ui.png.

    python examples/monitor_month.py --dir /tmp/month --figures docs/img
    python docs/make_monitor_screenshot.py /tmp/month

Starts ``mlflow server`` on 127.0.0.1 over the example's sqlite store, opens version 1's monitor
run on its "Model metrics" tab in headless Chromium (driven over the DevTools pipe by the tests'
``tests/support/browser.py``), waits until six charts are in the page (the UI fetches the metric
histories after the page has loaded, so a fixed delay is not enough on a busy machine), captures
the page until the screenshot shows their lines (the DOM alone was not enough: a chart still
loading paints a spinner over a plot already in the DOM), saves the top two rows of charts and
stops the server.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "img" / "monitor_month_mlflow_ui.png"
# six plotly charts drawn in the viewport and no loading spinner left there (the charts below it
# load lazily and keep theirs); the spinner's class is the MLflow 3 UI's. render_page checks it
# again after the capture (the UI refreshes its charts by itself)
CHARTS_DRAWN = """(() => {
  const spinning = [...document.querySelectorAll('.du-bois-light-spin-spinning')].filter(e => {
    const r = e.getBoundingClientRect(); return r.height > 0 && r.top < window.innerHeight; });
  const plots = [...document.querySelectorAll('.js-plotly-plot')].filter(e => {
    const r = e.getBoundingClientRect(); return r.height > 0 && r.top < window.innerHeight; });
  return spinning.length === 0 && plots.length >= 6;
})()"""


# a screenshot with the six charts drawn has about 5,800 such pixels, one still loading ~100
MIN_LINE_PIXELS = 2000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_up(url: str, server: subprocess.Popen, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except OSError:
            if time.monotonic() > deadline or server.poll() is not None:
                raise SystemExit(f"mlflow server did not answer {url}") from None
            time.sleep(1.0)


def drawn_line_pixels(png: bytes) -> int:
    """Pixels of the charts' blue lines in the chart area of a screenshot: the check that the
    picture shows drawn charts, whatever the DOM said (a chart still loading paints a spinner
    over a plot that is already in the DOM)."""
    import io

    import numpy as np
    from PIL import Image

    with Image.open(io.BytesIO(png)) as img:
        a = np.asarray(img.convert("RGB"), dtype=np.int64)[200:1000, 200:1100]
    r, g, b = a[..., 0], a[..., 1], a[..., 2]
    return int(np.sum((b > 150) & (r < 90) & (g > 80) & (g < 150)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store_dir", help="the --dir of a finished examples/monitor_month.py run")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import mlflow
    from PIL import Image
    from support.browser import find_chromium, render_page

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("chromium is not on PATH")
    store = Path(args.store_dir).resolve()
    mlflow.set_tracking_uri(f"sqlite:///{store / 'mlflow.db'}")
    exp = mlflow.get_experiment_by_name("monitor-month").experiment_id
    run = mlflow.MlflowClient().search_runs(
        [exp], "tags.`mlcal.monitor.model_version` = '1'")[0].info.run_id
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
         f"sqlite:///{store / 'mlflow.db'}", "--host", "127.0.0.1", "--port", str(port),
         "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)   # its own process group, stopped with its helpers below
    try:
        wait_until_up(f"http://127.0.0.1:{port}/health", server, args.timeout)
        page = render_page(
            chromium, f"http://127.0.0.1:{port}/#/experiments/{exp}/runs/{run}/model-metrics",
            width=1500, height=1100, settle=1.0, timeout=args.timeout, workdir=store,
            full_page=False, wait_for=CHARTS_DRAWN,
            accept=lambda png: drawn_line_pixels(png) >= MIN_LINE_PIXELS)
        print(f"{drawn_line_pixels(page.screenshot)} chart-line pixels")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    raw = store / "ui-raw.png"
    raw.write_bytes(page.screenshot)
    with Image.open(raw) as img:      # the first two rows of charts (the third loads lazily)
        img.crop((0, 0, img.width, 975)).save(args.out, optimize=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
