"""JSON and append-only JSONL files that survive a kill: every JSONL record is flushed and fsynced."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


class JsonlWriter:
    """Append records to a JSONL file, one fsync per record.

    A record is written as a single ``write`` of one line, so a kill leaves at most one torn
    last line, which :func:`read_jsonl` skips.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._handle = open(self.path, "a", encoding="utf-8")

    def _repair_torn_tail(self) -> None:
        """Cut a partial last line left by a kill so that appends start on a fresh line."""
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        with open(self.path, "rb+") as handle:
            data = handle.read()
            if data.endswith(b"\n"):
                return
            cut = data.rfind(b"\n") + 1
            handle.truncate(cut)

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n"
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlError(ValueError):
    """A JSONL line that is not one JSON object; the message starts with ``file:line:``."""


def iter_jsonl(path: str | Path, torn_tail: bool = True) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file, skipping blank lines.

    A torn (undecodable) last line is what a kill leaves in an append-only file: it is skipped when
    ``torn_tail`` (crash recovery) and refused otherwise. Any other bad line raises :class:`JsonlError`
    naming ``file:line``.
    """
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            if torn_tail and number == len(lines) and not line.endswith(b"\n"):
                return
            raise JsonlError(f"{path}:{number}: truncated or corrupt JSON line ({error})") from None
        if not isinstance(record, dict):
            raise JsonlError(f"{path}:{number}: expected a JSON object, got {type(record).__name__}")
        yield record


def read_jsonl(path: str | Path, torn_tail: bool = True) -> list[dict[str, Any]]:
    """All records of a JSONL file (see :func:`iter_jsonl`)."""
    return list(iter_jsonl(path, torn_tail))


def write_json(path: str | Path, obj: Any, indent: int = 2) -> Path:
    """Write ``obj`` as indented UTF-8 JSON with a trailing newline, atomically and durably (temp file, fsync,
    rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(obj, ensure_ascii=False, indent=indent) + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    return path
