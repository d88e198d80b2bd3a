"""A lightweight phase timer: wall and CPU seconds, calls, useful FLOPs and bytes per named phase.

Code marks a phase with ``with phase("prefill"):``; nothing is measured unless a :class:`PhaseTimer` is
recording (``with PhaseTimer() as timer:``), and then a phase's key is its path below the enclosing
phases (``"rollout/prefill"``). Time is *exclusive*: a phase's seconds exclude those of the phases nested
inside it, so the keys partition the recorded wall time. :func:`add_work` credits the innermost open
phase with arithmetic and memory traffic (computed only when :func:`recording` says a timer listens). Off,
``phase`` costs one context-variable read and returns a shared no-op context manager.
"""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Self

_TIMER: ContextVar[PhaseTimer | None] = ContextVar("intraskill_phase_timer", default=None)


@dataclass
class PhaseTotals:
    """One phase key's totals: exclusive wall and CPU seconds, times entered, useful FLOPs and bytes moved."""

    wall_s: float = 0.0
    cpu_s: float = 0.0
    calls: int = 0
    flops: float = 0.0
    bytes: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"wall_s": self.wall_s, "cpu_s": self.cpu_s, "calls": self.calls, "flops": self.flops,
                "bytes": self.bytes}


@dataclass
class _Open:
    key: str
    wall: float
    cpu: float


@dataclass
class PhaseTimer:
    """Records every :func:`phase` entered in its context (the current thread's, and tasks copying it)."""

    totals: dict[str, PhaseTotals] = field(default_factory=dict)
    _stack: list[_Open] = field(default_factory=list)
    _token: Any = None

    def __enter__(self) -> Self:
        if _TIMER.get() is not None:
            raise RuntimeError("a PhaseTimer is already recording in this context")
        self._token = _TIMER.set(self)
        self._push("")
        return self

    def __exit__(self, *exc: object) -> None:
        self._pop()
        _TIMER.reset(self._token)

    def _push(self, name: str) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        if self._stack:
            self._charge(self._stack[-1], wall, cpu)
        parent = self._stack[-1].key if self._stack else ""
        key = f"{parent}/{name}" if parent and name else name or parent
        self._stack.append(_Open(key, wall, cpu))
        self.totals.setdefault(key, PhaseTotals()).calls += 1

    def _pop(self) -> None:
        wall, cpu = time.perf_counter(), time.process_time()
        self._charge(self._stack.pop(), wall, cpu)
        if self._stack:
            self._stack[-1].wall, self._stack[-1].cpu = wall, cpu

    def _charge(self, entry: _Open, wall: float, cpu: float) -> None:
        totals = self.totals[entry.key]
        totals.wall_s += wall - entry.wall
        totals.cpu_s += cpu - entry.cpu
        entry.wall, entry.cpu = wall, cpu

    def add_work(self, flops: float, moved: float) -> None:
        totals = self.totals[self._stack[-1].key]
        totals.flops += flops
        totals.bytes += moved

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """``key → totals`` (the root's own time under ``""``: outside every phase)."""
        return {key: totals.to_dict() for key, totals in self.totals.items()}


class _Phase:
    __slots__ = ("name", "timer")

    def __init__(self, timer: PhaseTimer, name: str) -> None:
        self.timer, self.name = timer, name

    def __enter__(self) -> None:
        self.timer._push(self.name)

    def __exit__(self, *exc: object) -> None:
        self.timer._pop()


class _Off:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def phase(name: str) -> _Phase | _Off:
    """A context manager timing phase ``name`` (nested under the open phases) when a timer records."""
    timer = _TIMER.get()
    return _OFF if timer is None else _Phase(timer, name)


def recording() -> bool:
    """Whether a :class:`PhaseTimer` records here (compute FLOP and byte counts only then)."""
    return _TIMER.get() is not None


def add_work(flops: float, moved: float = 0.0) -> None:
    """Credit the innermost open phase with ``flops`` useful floating-point operations and ``moved`` bytes of
    memory traffic (no-op when off)."""
    timer = _TIMER.get()
    if timer is not None:
        timer.add_work(flops, moved)
