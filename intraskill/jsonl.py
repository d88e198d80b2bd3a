"""JSON and append-only JSONL files that survive a kill: every JSONL record is flushed and fsynced.

Each record :class:`JsonlWriter` appends carries ``record_sha256``, the SHA-256 of the previous record's digest
followed by this record's canonical JSON (:func:`record_digest`), so the records form a chain. Every read
(:func:`iter_jsonl`, and the writer before it appends to an existing file) verifies the chain and refuses an
edited, inserted, removed or reordered record with :class:`JsonlError` naming ``file:line``. The chain catches
accidental and naive edits (a reward changed in an editor, a line deleted); it is no signature: whoever edits a
file on purpose can recompute every digest after the edit, and cutting records off the end leaves a valid chain.
A file written before the digests (no record carries one) still reads as it is; the writer chains its records
once, with a warning naming the file, before it appends. A file where some records carry a digest and others
do not is refused.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from intraskill.hashing import canonical_json, sha256_text

LOGGER = logging.getLogger(__name__)

DIGEST_KEY = "record_sha256"
"""The field holding a record's chained digest (stripped from the records :func:`iter_jsonl` yields)."""


def record_digest(previous: str, record: dict[str, Any]) -> str:
    """The chained digest of ``record`` (without its :data:`DIGEST_KEY`) after a record whose digest is
    ``previous`` (``""`` for the first record)."""
    return sha256_text(previous + canonical_json(record))


class JsonlWriter:
    """Append records to a JSONL file, one fsync per record, each chained to the previous one (see the module).

    A record is written as a single ``write`` of one line, so a kill leaves at most one torn
    last line, which :func:`read_jsonl` skips. Opening verifies the records already there
    (:class:`JsonlError` naming ``file:line`` on a broken chain).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._head = self._verified_head()
        self._handle = open(self.path, "a", encoding="utf-8")
        self._size = self.path.stat().st_size

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

    def _verified_head(self) -> str:
        """The last digest of the file's verified chain (``""`` when empty); a file written before the digests
        is chained first (rewritten atomically, with a warning)."""
        head, legacy = "", []
        for record, digest in _chained(self.path, torn_tail=False):
            if digest is None:
                legacy.append(record)
            else:
                head = digest
        if not legacy:
            return head
        LOGGER.warning("%s: written before records carried digests; chaining its %d records now (edits made "
                       "before this point cannot be detected)", self.path, len(legacy))
        temporary = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        with open(temporary, "w", encoding="utf-8") as handle:
            for record in legacy:
                head = record_digest(head, record)
                handle.write(json.dumps({**record, DIGEST_KEY: head}, ensure_ascii=False, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        return head

    def append(self, record: dict[str, Any]) -> None:
        if DIGEST_KEY in record:
            raise ValueError(f"{self.path}: a record may not carry its own {DIGEST_KEY!r}")
        if os.fstat(self._handle.fileno()).st_size != self._size:  # another writer appended meanwhile
            self._head = self._verified_head()
        stored = json.loads(json.dumps(record, ensure_ascii=False))  # the record as a reader will see it
        self._head = record_digest(self._head, stored)
        line = json.dumps({**stored, DIGEST_KEY: self._head}, ensure_ascii=False, sort_keys=True) + "\n"
        self._handle.write(line)
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self._size = os.fstat(self._handle.fileno()).st_size

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "JsonlWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class JsonlError(ValueError):
    """A JSONL line that is not one JSON object; the message starts with ``file:line:``."""


def _chained(path: Path, torn_tail: bool) -> Iterator[tuple[dict[str, Any], str | None]]:
    """``(record without its digest, digest or None)`` per record of ``path``, the chain verified."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        lines = handle.readlines()
    previous, chained = "", None
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
        digest = record.pop(DIGEST_KEY, None)
        if chained is None:
            chained = digest is not None
        if (digest is not None) != chained:
            state = "has no" if chained else "carries a"
            raise JsonlError(f"{path}:{number}: record {state} {DIGEST_KEY} unlike the records before it "
                             "(the file was edited)")
        if digest is not None:
            if digest != record_digest(previous, record):
                raise JsonlError(f"{path}:{number}: record does not match its {DIGEST_KEY} (edited, inserted, "
                                 "removed or reordered after it was written)")
            previous = digest
        yield record, digest


def iter_jsonl(path: str | Path, torn_tail: bool = True) -> Iterator[dict[str, Any]]:
    """Yield the records of a JSONL file (without their digests), skipping blank lines, the chain verified.

    A torn (undecodable) last line is what a kill leaves in an append-only file: it is skipped when
    ``torn_tail`` (crash recovery) and refused otherwise. Any other bad line, and a record that breaks the
    digest chain, raises :class:`JsonlError` naming ``file:line``.
    """
    for record, _ in _chained(Path(path), torn_tail):
        yield record


def verify_jsonl_tree(root: str | Path) -> int:
    """Verify the chain of every ``*.jsonl`` file under ``root`` (what a resume relies on); returns the number of
    records read. Raises :class:`JsonlError` naming ``file:line`` of the first broken one."""
    return sum(1 for path in sorted(Path(root).rglob("*.jsonl")) for _ in _chained(path, torn_tail=True))


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
