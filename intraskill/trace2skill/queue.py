"""The analysis queue a training round hands to Trace2Skill, and the pre-analysis re-check.

Reference: docs/method.md §3.2–3.3. Only failed full-skill diagnostic retries are analyzed.
The round appends one :class:`AnalysisItem` per failed retry to ``<round_dir>/analysis_queue.jsonl``
(schema ``intraskill-analysis-queue-v1``)::

    {"schema_version": "intraskill-analysis-queue-v1", "episode_id": "train-group-…-full-skill-retry",
     "group_index": 12, "task_id": 345, "split": "train", "diagnostic_full_skill": true,
     "trace": {…EpisodeTrace.to_dict()…}}

``trace_path`` (a JSON file holding one trace record, relative to the queue file) may replace
``trace``. Before analysis each item is re-checked (:func:`recheck_item`): the trace is completed
and done, the split is train, ``r_success = 0``, the retry is ``diagnostic_full_skill``, and its
injected (skill_id, version, content) list equals the current bank's enabled skills exactly.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from intraskill.agent.traces import EpisodeStatus, EpisodeTrace
from intraskill.jsonl import iter_jsonl
from intraskill.skills.bank import SkillBank

QUEUE_SCHEMA_VERSION = "intraskill-analysis-queue-v1"
TRAIN_SPLIT = "train"


class QueueError(ValueError):
    """A queue record is malformed; the message names the line and field."""


@dataclass(frozen=True)
class AnalysisItem:
    """One failed full-skill retry waiting for analysis (see the module docstring)."""

    episode_id: str
    group_index: int
    task_id: int
    split: str
    diagnostic_full_skill: bool
    trace: EpisodeTrace

    @property
    def card_id(self) -> str:
        """The evidence card ID, ``failure-<episode_id>-01`` (release form)."""
        return f"failure-{self.episode_id}-01"

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": QUEUE_SCHEMA_VERSION, "episode_id": self.episode_id,
                "group_index": self.group_index, "task_id": self.task_id, "split": self.split,
                "diagnostic_full_skill": self.diagnostic_full_skill, "trace": self.trace.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], base_dir: Path | None = None,
                  where: str = "queue record") -> "AnalysisItem":
        """Parse a queue record; ``trace_path`` is resolved against ``base_dir``."""
        if data.get("schema_version") != QUEUE_SCHEMA_VERSION:
            raise QueueError(f"{where}.schema_version: expected {QUEUE_SCHEMA_VERSION!r}, "
                             f"got {data.get('schema_version')!r}")
        for key, kind in (("episode_id", str), ("group_index", int), ("task_id", int), ("split", str),
                          ("diagnostic_full_skill", bool)):
            if not isinstance(data.get(key), kind):
                raise QueueError(f"{where}.{key}: expected {kind.__name__}, got {data.get(key)!r}")
        if "trace" in data:
            raw = data["trace"]
        elif "trace_path" in data:
            path = Path(data["trace_path"])
            path = path if path.is_absolute() or base_dir is None else base_dir / path
            raw = json.loads(path.read_text(encoding="utf-8"))
        else:
            raise QueueError(f"{where}: needs 'trace' or 'trace_path'")
        try:
            trace = EpisodeTrace.from_dict(raw)
        except (TypeError, ValueError) as error:
            raise QueueError(f"{where}.trace: {error}") from None
        if trace.episode_id != data["episode_id"] or trace.task_id != data["task_id"]:
            raise QueueError(f"{where}.trace: episode/task ({trace.episode_id}, {trace.task_id}) differ from "
                             f"the record's ({data['episode_id']}, {data['task_id']})")
        return cls(data["episode_id"], data["group_index"], data["task_id"], data["split"],
                   data["diagnostic_full_skill"], trace)


def read_analysis_queue(path: str | Path) -> list[AnalysisItem]:
    """The queue's items in file order; a later record of the same ``episode_id`` replaces an earlier one."""
    path = Path(path)
    items: dict[str, AnalysisItem] = {}
    for number, record in enumerate(iter_jsonl(path), start=1):
        item = AnalysisItem.from_dict(record, path.parent, f"{path.name}:{number}")
        items[item.episode_id] = item
    return list(items.values())


def injected_skills(trace: EpisodeTrace) -> list[tuple[str, str, str]]:
    """The (skill_id, version, content) list the runtime injected (trace provenance)."""
    return [(s.get("skill_id"), s.get("version"), s.get("content"))
            for s in trace.provenance.get("selected_skills") or []]


def recheck_item(item: AnalysisItem, bank: SkillBank) -> str | None:
    """``None`` when the item may be analyzed, else the first failed §3.3 check (``field: reason``)."""
    trace = item.trace
    if trace.status != EpisodeStatus.COMPLETED.value:
        return f"status: {trace.status!r} is not completed"
    if item.split != TRAIN_SPLIT:
        return f"split: {item.split!r} is not {TRAIN_SPLIT!r}"
    if trace.reward is None or trace.termination_reason is None:
        return "done: the trace has no scored terminal"
    if trace.reward.r_success != 0:
        return f"r_success: expected 0, got {trace.reward.r_success}"
    if not item.diagnostic_full_skill:
        return "diagnostic_full_skill: the trace is not a full-skill diagnostic retry"
    current = [(s.skill_id, s.version, s.content) for s in bank.enabled_skills()]
    if injected_skills(trace) != current:
        return "injected_skills: the retry's (id, version, content) list differs from the current bank"
    return None
