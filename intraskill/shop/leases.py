"""Slot leases for the store service (reference ``shopsimulator.md`` §6, §8 item 10).

A service runs ``n`` environment slots over one shared engine. A ``reset`` acquires a free slot
and receives a fresh uuid4 lease for it; every later call on that slot must present the lease.
A slot is never released automatically (not even when its episode ends), because that would race
with the caller's own ``release_one``; the caller releases it, normally in a ``finally``.
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

    Examples
    --------
    >>> pool = SlotLeasePool(2)
    >>> slot, lease = pool.acquire()
    >>> pool.validate(slot, lease)
    >>> pool.release(slot, lease)
    >>> pool.free_count
    2
    """

    def __init__(self, n: int) -> None:
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"slots: need an integer >= 1, got {n!r}")
        self._size = n
        self._free: set[int] = set(range(n))
        self._leases: dict[int, str] = {}
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
            return len(self._free)

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
            while not self._free and not self._closed:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no free slot within {timeout} s ({self._size} slots, all leased)")
                self._cond.wait(remaining)
            if self._closed:
                raise PoolClosedError("the slot pool is closed")
            slot = min(self._free)
            self._free.remove(slot)
            lease = uuid.uuid4().hex
            self._leases[slot] = lease
            return slot, lease

    def validate(self, slot: int, lease: str) -> None:
        """Check that ``lease`` is the current lease of ``slot``.

        Raises
        ------
        ValueError
            ``slot`` is not a slot index of this pool.
        StaleLeaseError
            The slot is free or holds another lease.
        """
        self._check_slot(slot)
        with self._cond:
            current = self._leases.get(slot)
        if current is None or current != lease:
            raise StaleLeaseError(f"stale lease for slot {slot}")

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
            del self._leases[slot]
            self._free.add(slot)
            self._cond.notify()

    def release_all(self) -> list[int]:
        """Free every leased slot (all outstanding leases become stale); returns the freed slots."""
        with self._cond:
            freed = sorted(self._leases)
            self._leases.clear()
            self._free.update(freed)
            self._cond.notify_all()
            return freed

    def close(self) -> None:
        """Refuse further acquires and wake every waiter with :class:`PoolClosedError`."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def _check_slot(self, slot: int) -> None:
        if not isinstance(slot, int) or isinstance(slot, bool) or not 0 <= slot < self._size:
            raise ValueError(f"env_idx: need a slot index in [0, {self._size}), got {slot!r}")
