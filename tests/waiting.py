"""Tests wait on the state they await, never on a fixed sleep: :func:`wait_until` polls it up to a deadline."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], bool], what: str, timeout_s: float = 5.0, every_s: float = 0.02) -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` when it still does not after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(every_s)
