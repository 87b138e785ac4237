"""Say so when a step takes long: silent for fast steps, one line on stderr for slow ones.

``with slow_step("saving the base model"):`` prints ``mlcal: saving the base model ...`` once
the step has run for :data:`AFTER_SECONDS` and ``mlcal: saving the base model done in 4.2 s``
when it ends, so a save or log that takes seconds is never a silent wait, while the usual
millisecond steps print nothing.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Iterator

#: a step running longer than this announces itself
AFTER_SECONDS = 2.0


def _say(text: str) -> None:
    print(f"mlcal: {text}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def slow_step(message: str, after: float | None = None) -> Iterator[None]:
    """Announce ``message`` on stderr if the block runs longer than ``after`` seconds
    (default :data:`AFTER_SECONDS`), then its duration when it ends."""
    delay = AFTER_SECONDS if after is None else after
    announced = threading.Event()

    def announce() -> None:
        announced.set()
        _say(f"{message} ...")

    timer = threading.Timer(delay, announce)
    timer.daemon = True
    start = time.perf_counter()
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()     # the announcement, if it fired, is printed before the end line
        if announced.is_set():
            _say(f"{message} done in {time.perf_counter() - start:.1f} s")
