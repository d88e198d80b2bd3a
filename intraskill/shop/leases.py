"""Slot leases for the store service (reference ``docs/store.md`` §6, §8 item 10).

A service runs ``n`` environment slots over one shared engine. A ``reset`` acquires a free slot
and receives a fresh uuid4 lease for it; every later call on that slot must present the lease.
A slot is never released when its episode ends, because that would race with the caller's own
``release_one``; the caller releases it, normally in a ``finally``. The one automatic release is
idle expiry: with ``idle_timeout`` set, a lease unused (no acquire, validate) for that long expires
and its slot returns to the pool, so a client that died cannot hold a slot forever.
"""

from __future__ import annotations

import threading
import time
import uuid


class LeaseError(RuntimeError):
    """Base class of lease failures."""


class StaleLeaseError(LeaseError):
    """The presented lease is not the slot's current lease (the HTTP service answers 409)."""


class LeaseMismatchError(LeaseError):
    """A release presented a lease the slot does not hold, e.g. a duplicate release."""


class PoolClosedError(LeaseError):
    """The pool was closed (service shutting down) while a caller waited for a slot."""


class SlotLeasePool:
    """A thread-safe set of free slots with one uuid4 lease per leased slot.

    Parameters
    ----------
    n:
        Number of slots, numbered ``0 .. n-1``. Must be at least 1.
    idle_timeout:
        Seconds after which an unused lease expires (its slot is freed); ``None`` never expires.

    Examples
    --------
    >>> pool = SlotLeasePool(2)
    >>> slot, lease = pool.acquire()
    >>> pool.validate(slot, lease)
    >>> pool.release(slot, lease)
    >>> pool.free_count
    2
    """

    def __init__(self, n: int, idle_timeout: float | None = None) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"slots: need an integer >= 1, got {n!r}")
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(f"idle_timeout: need a positive number of seconds or None, got {idle_timeout!r}")
        self._size = n
        self._idle_timeout = idle_timeout
        self._free: set[int] = set(range(n))
        self._leases: dict[int, str] = {}
        self._used: dict[int, float] = {}
        self._expired = 0
        self._waiting = 0
        self._closed = False
        self._cond = threading.Condition()

    @property
    def size(self) -> int:
        """Total number of slots."""
        return self._size

    @property
    def free_count(self) -> int:
        """Number of slots not currently leased."""
        with self._cond:
            self._expire_idle()
            return len(self._free)

    @property
    def expired_count(self) -> int:
        """Number of leases freed by idle expiry so far."""
        with self._cond:
            self._expire_idle()
            return self._expired

    @property
    def waiting(self) -> int:
        """Number of acquirers blocked until a slot frees (what a test or ``/healthz`` waits on instead of a sleep)."""
        with self._cond:
            return self._waiting

    def acquire(self, timeout: float | None = None) -> tuple[int, str]:
        """Lease the lowest-numbered free slot, blocking while none is free.

        Parameters
        ----------
        timeout:
            Seconds to wait for a free slot; ``None`` waits indefinitely.

        Returns
        -------
        (slot, lease):
            The slot index and its new uuid4 lease (hex string).

        Raises
        ------
        TimeoutError
            No slot became free within ``timeout`` seconds.
        PoolClosedError
            The pool was closed before or while waiting.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not self._expire_idle() and not self._closed:
                now = time.monotonic()
                remaining = None if deadline is None else deadline - now
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no free slot within {timeout} s ({self._size} slots, all leased)")
                expiry = self._next_expiry()
                if expiry is not None:
                    remaining = expiry - now if remaining is None else min(remaining, expiry - now)
                self._waiting += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiting -= 1
            if self._closed:
                raise PoolClosedError("the slot pool is closed")
            slot = min(self._free)
            self._free.remove(slot)
            lease = uuid.uuid4().hex
            self._leases[slot] = lease
            self._used[slot] = time.monotonic()
            return slot, lease

    def validate(self, slot: int, lease: str) -> None:
        """Check that ``lease`` is the current lease of ``slot`` and mark it used (idle clock restarts).

        Raises
        ------
        ValueError
            ``slot`` is not a slot index of this pool.
        StaleLeaseError
            The slot is free or holds another lease.
        """
        self._check_slot(slot)
        with self._cond:
            self._expire_idle()
            if self._leases.get(slot) != lease:
                raise StaleLeaseError(f"stale lease for slot {slot}")
            self._used[slot] = time.monotonic()

    def release(self, slot: int, lease: str) -> None:
        """Free ``slot`` if ``lease`` is its current lease and wake one waiting acquirer.

        Raises
        ------
        ValueError
            ``slot`` is not a slot index of this pool.
        LeaseMismatchError
            The slot is free (a duplicate release) or holds another lease.
        """
        self._check_slot(slot)
        with self._cond:
            current = self._leases.get(slot)
            if current is None:
                raise LeaseMismatchError(f"slot {slot} is not leased (duplicate release?)")
            if current != lease:
                raise LeaseMismatchError(f"slot {slot} is leased under another lease")
            self._free_slot(slot)
            self._cond.notify()

    def release_all(self) -> list[int]:
        """Free every leased slot (all outstanding leases become stale); returns the freed slots."""
        with self._cond:
            freed = sorted(self._leases)
            for slot in freed:
                self._free_slot(slot)
            self._cond.notify_all()
            return freed

    def close(self) -> None:
        """Refuse further acquires and wake every waiter with :class:`PoolClosedError`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _free_slot(self, slot: int) -> None:
        del self._leases[slot], self._used[slot]
        self._free.add(slot)

    def _expire_idle(self) -> bool:
        """Free every lease idle for ``idle_timeout`` (caller holds the lock); True if a slot is free."""
        if self._idle_timeout is not None and self._used:
            cutoff = time.monotonic() - self._idle_timeout
            for slot in [s for s, used in self._used.items() if used <= cutoff]:
                self._free_slot(slot)
                self._expired += 1
                self._cond.notify()
        return bool(self._free)

    def _next_expiry(self) -> float | None:
        if self._idle_timeout is None or not self._used:
            return None
        return min(self._used.values()) + self._idle_timeout

    def _check_slot(self, slot: int) -> None:
        if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < self._size:
            raise ValueError(f"env_idx: need a slot index in [0, {self._size}), got {slot!r}")
