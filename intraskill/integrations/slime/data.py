"""The slime prompt-data file: one line per task, ``prompt`` = the task ID, ``metadata`` = its identity.

Reference: ``docs/method.md`` §6.1 (``data/shopsim_train.jsonl``: ``prompt`` is the task ID as a
string, ``metadata`` {schema_version, task_id, split}; loaded with ``--input-key prompt
--metadata-key metadata --apply-chat-template --rollout-shuffle``). The real prompt is built by the
generate hook from the store's reset, so the task ID is read from ``metadata``, never from the
(chat-templated) prompt text.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from intraskill.jsonl import JsonlWriter
from intraskill.shop.splits import Splits

TASKS_SCHEMA_VERSION = "intraskill-slime-tasks-v1"
TRAIN_SPLIT = "train"


class TaskRecordError(ValueError):
    """A sample's metadata is not a task record of this schema; the message names the field."""


def slime_task_records(splits: Splits, split: str = TRAIN_SPLIT) -> list[dict[str, Any]]:
    """One record per task of ``split`` in ascending task ID order.

    Examples
    --------
    >>> from intraskill.shop.splits import Splits
    >>> record = slime_task_records(Splits({"train": (4, 9), "val": (), "test": ()}))[1]
    >>> record["prompt"], record["metadata"]["task_id"], record["metadata"]["split"]
    ('9', 9, 'train')
    """
    return [
        {"prompt": str(task_id),
         "metadata": {"schema_version": TASKS_SCHEMA_VERSION, "task_id": task_id, "split": split}}
        for task_id in sorted(splits.ids(split))
    ]


def write_slime_tasks(splits: Splits, path: str | Path, split: str = TRAIN_SPLIT) -> Path:
    """Write ``split``'s task file for ``--prompt-data`` (JSONL, each task exactly once); returns the path.

    An existing file is replaced, so the file always holds exactly the split's IDs.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    with JsonlWriter(path) as writer:
        for record in slime_task_records(splits, split):
            writer.append(record)
    return path


def task_from_metadata(metadata: Mapping[str, Any] | None) -> tuple[int, str]:
    """``(task_id, split)`` of a sample's ``metadata`` (raises :class:`TaskRecordError` on a bad record)."""
    if not isinstance(metadata, Mapping):
        raise TaskRecordError("sample.metadata: expected the task record dict (--metadata-key metadata)")
    if metadata.get("schema_version") != TASKS_SCHEMA_VERSION:
        raise TaskRecordError(f"sample.metadata.schema_version: expected {TASKS_SCHEMA_VERSION!r}, "
                              f"got {metadata.get('schema_version')!r}")
    task_id, split = metadata.get("task_id"), metadata.get("split")
    if isinstance(task_id, bool) or not isinstance(task_id, int):
        raise TaskRecordError(f"sample.metadata.task_id: expected an integer, got {task_id!r}")
    if not isinstance(split, str):
        raise TaskRecordError(f"sample.metadata.split: expected a string, got {split!r}")
    return task_id, split
