"""The dynamic sampling filter: drop technical groups, prefer groups with a reward spread.

Reference: ``docs/method.md`` §3.4. Decisions, in order, for each finished group:

1. any sibling unscored → ``keep=False``, reason ``shopsim_unscored_technical_group``, no fallback;
   ``intraskill_max_consecutive_failed_groups`` (8) such groups in a row raise
   :class:`~intraskill.training.admission.UnscoredStreakError` (the streak is process-global, as in the
   release, and resets on a scored group);
2. unique-rollout rewards spread by more than 1e-6 → keep;
3. otherwise ``keep=False``, reason ``shopsim_zero_std_group``, ``keep_when_insufficient=True``
   (slime keeps the group anyway once ``remaining <= rollout_batch_size``, so no new wave starts).

slime calls ``call_dynamic_filter(fn, args, group)`` and wraps any return value that is not its
``DynamicFilterOutput`` as ``DynamicFilterOutput(keep=value)`` (``slime/rollout/filter_hub/base_types.py``),
so the hook returns slime's own class when slime is importable. ``keep_when_insufficient`` exists
in recent slime only; with an older slime a zero-spread group is simply dropped.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass
from typing import Any

from intraskill.integrations.slime.rewards import finished_group
from intraskill.training.admission import (
    MAX_CONSECUTIVE_UNSCORED_GROUPS,
    TECHNICAL_DROP_REASON,
    ZERO_SPREAD_TOLERANCE,
    ZERO_STD_DROP_REASON,
    FinishedGroup,
    UnscoredStreakError,
)


@dataclass
class GroupFilterDecision:
    """The filter's verdict on one group (field names as slime's ``DynamicFilterOutput``)."""

    keep: bool
    reason: str | None = None
    keep_when_insufficient: bool = False


class _Streak:
    """Consecutive unscored groups seen by this process (thread-safe)."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = threading.Lock()

    def observe(self, scored: bool, limit: int, group_index: int) -> None:
        with self._lock:
            self.count = 0 if scored else self.count + 1
            if self.count >= limit:
                raise UnscoredStreakError(
                    f"{self.count} consecutive groups had an unscored rollout (last: group {group_index}); "
                    "check the store service and the SGLang router"
                )


_STREAK = _Streak()


def decide_group(group: FinishedGroup) -> GroupFilterDecision:
    """The §3.4 decision for one group, without the streak bookkeeping."""
    if not group.scored:
        return GroupFilterDecision(False, TECHNICAL_DROP_REASON)
    if group.reward_spread > ZERO_SPREAD_TOLERANCE:
        return GroupFilterDecision(True)
    return GroupFilterDecision(False, ZERO_STD_DROP_REASON, keep_when_insufficient=True)


def _slime_output(decision: GroupFilterDecision) -> Any:
    """The decision as slime's ``DynamicFilterOutput`` (our dataclass when slime is absent)."""
    try:
        # deferred: slime exists only on the scale tier's machines
        from slime.rollout.filter_hub.base_types import DynamicFilterOutput
    except ImportError:
        return decision
    values = dataclasses.asdict(decision)
    known = {spec.name for spec in dataclasses.fields(DynamicFilterOutput)}
    return DynamicFilterOutput(**{key: value for key, value in values.items() if key in known})


def fully_scored_group_filter(args: Any, samples: list[Any], **kwargs: Any) -> Any:
    """``--dynamic-sampling-filter-path`` hook: keep/drop one finished group (see the module doc).

    Parameters
    ----------
    args : slime's arguments; ``intraskill_max_consecutive_failed_groups`` bounds the unscored streak.
    samples : the group's samples (or fan-out lists of segments sharing a ``rollout_id``).
    """
    group = finished_group(samples)
    decision = decide_group(group)
    limit = getattr(args, "intraskill_max_consecutive_failed_groups", None) or MAX_CONSECUTIVE_UNSCORED_GROUPS
    _STREAK.observe(group.scored, int(limit), group.group_index)
    return _slime_output(decision)
