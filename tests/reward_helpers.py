"""A typed reward for tests that only care about the strict score."""

from __future__ import annotations

from intraskill.shop.reward import Reward


def strict_reward(r: float) -> Reward:
    """A reward with ``r_strict = r`` (through ``r_att``), succeeding exactly when ``r == 1``."""
    return Reward(r_type=1.0, r_att=r, r_option=1.0, r_price=1.0, r_loose=r, r_strict=r, r_success=float(r == 1.0))
