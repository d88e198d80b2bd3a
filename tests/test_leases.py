"""Slot-lease contract (reference test_slot_lease_contract): release only when asked, duplicate
release visible, stale lease rejected, release_all recovers slots, a blocking acquire wakes on release."""

from __future__ import annotations

import threading

import pytest
from waiting import wait_until

from intraskill.shop import leases
from intraskill.shop.leases import (
    LeaseMismatchError,
    PoolClosedError,
    SlotLeasePool,
    StaleLeaseError,
)


def test_acquire_hands_out_distinct_slots_and_fresh_leases() -> None:
    pool = SlotLeasePool(3)
    taken = [pool.acquire() for _ in range(3)]
    assert sorted(slot for slot, _ in taken) == [0, 1, 2]
    assert len({lease for _, lease in taken}) == 3
    assert pool.free_count == 0


def test_slot_stays_leased_until_released() -> None:
    pool = SlotLeasePool(1)
    slot, lease = pool.acquire()
    with pytest.raises(TimeoutError):
        pool.acquire(timeout=0.05)
    pool.validate(slot, lease)  # still valid: nothing released it behind the caller's back
    pool.release(slot, lease)
    assert pool.free_count == 1


def test_duplicate_release_is_visible() -> None:
    pool = SlotLeasePool(1)
    slot, lease = pool.acquire()
    pool.release(slot, lease)
    with pytest.raises(LeaseMismatchError, match="not leased"):
        pool.release(slot, lease)


def test_release_with_wrong_lease_leaves_the_slot_leased() -> None:
    pool = SlotLeasePool(1)
    slot, lease = pool.acquire()
    with pytest.raises(LeaseMismatchError, match="another lease"):
        pool.release(slot, "0" * 32)
    pool.validate(slot, lease)
    assert pool.free_count == 0


def test_stale_lease_is_rejected_after_reacquire() -> None:
    pool = SlotLeasePool(1)
    slot, old = pool.acquire()
    pool.release(slot, old)
    again, new = pool.acquire()
    assert again == slot and new != old
    with pytest.raises(StaleLeaseError):
        pool.validate(slot, old)
    pool.validate(slot, new)


def test_validate_on_a_free_slot_is_stale_and_bad_slot_names_the_field() -> None:
    pool = SlotLeasePool(2)
    with pytest.raises(StaleLeaseError):
        pool.validate(1, "whatever")
    with pytest.raises(ValueError, match="env_idx"):
        pool.validate(2, "whatever")
    with pytest.raises(ValueError, match="slots"):
        SlotLeasePool(0)


def test_release_all_recovers_every_slot_and_invalidates_leases() -> None:
    pool = SlotLeasePool(3)
    held = [pool.acquire() for _ in range(2)]
    assert pool.release_all() == sorted(slot for slot, _ in held)
    assert pool.free_count == 3
    for slot, lease in held:
        with pytest.raises(StaleLeaseError):
            pool.validate(slot, lease)


def wait_for_waiters(pool: SlotLeasePool, count: int) -> None:
    """Return once ``count`` acquirers are blocked in ``pool`` (fail after 5 s)."""
    wait_until(lambda: pool.waiting == count, f"{count} acquirers blocked in the pool", every_s=0.005)


def test_blocking_acquire_wakes_on_release() -> None:
    pool = SlotLeasePool(1)
    slot, lease = pool.acquire()
    got: list[tuple[int, str]] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=5.0)))
    waiter.start()
    wait_for_waiters(pool, 1)
    assert waiter.is_alive() and not got  # still blocked: the only slot is leased
    pool.release(slot, lease)
    waiter.join(timeout=2.0)
    assert not waiter.is_alive()
    assert got and got[0][0] == slot and got[0][1] != lease


def test_close_wakes_waiters_with_an_error() -> None:
    pool = SlotLeasePool(1)
    pool.acquire()
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            pool.acquire()
        except PoolClosedError as exc:
            errors.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    wait_for_waiters(pool, 1)  # blocked in acquire, so close() must wake it
    pool.close()
    waiter.join(timeout=2.0)
    assert not waiter.is_alive() and len(errors) == 1


class Clock:
    """The pool's monotonic clock, moved by the test (the pool's condition waits still run in real time)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_an_idle_lease_expires_and_wakes_a_waiter(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(leases, "time", clock)
    pool = SlotLeasePool(1, idle_timeout=60.0)
    slot, lease = pool.acquire()
    clock.now += 40
    pool.validate(slot, lease)  # use restarts the idle clock
    clock.now += 40
    pool.validate(slot, lease)  # 80 s after the acquire, 40 s after its last use: still held
    assert pool.free_count == 0 and pool.expired_count == 0
    clock.now += 59.95  # the lease expires in 0.05 s: a waiter waits that long at a time, not its own timeout
    got: list[tuple[int, str]] = []
    waiter = threading.Thread(target=lambda: got.append(pool.acquire(timeout=3600.0)), daemon=True)
    waiter.start()
    wait_for_waiters(pool, 1)
    assert not got
    clock.now += 0.1  # expired: the waiter's next look takes the slot, with no release or notify to wake it
    waiter.join(timeout=5.0)
    assert not waiter.is_alive(), "the waiter kept waiting for its own timeout, not the lease's expiry"
    (again, fresh), = got
    assert again == slot and fresh != lease
    assert pool.expired_count == 1
    with pytest.raises(StaleLeaseError):
        pool.validate(slot, lease)
    with pytest.raises(ValueError, match="idle_timeout"):
        SlotLeasePool(1, idle_timeout=0)
