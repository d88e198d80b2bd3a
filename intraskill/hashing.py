"""Canonical JSON hashing and SHA-256-derived uniform draws.

Every random decision of the method that must survive resume and re-scheduling (mask draws,
episode seeds, bootstrap seeds) is a pure function of a text key hashed with SHA-256.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(obj: Any) -> str:
    """Sorted keys, compact separators, non-ASCII kept (the SkillBank identity convention)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def sha256_text(text: str) -> str:
    """Hex SHA-256 of UTF-8 text."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_json(obj: Any) -> str:
    """Hex SHA-256 of the canonical JSON of ``obj``."""
    return sha256_text(canonical_json(obj))


def sha256_file(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def u64(key: str) -> int:
    """First 8 bytes (big-endian) of SHA-256(key) as an integer in [0, 2**64)."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


def unit_draw(key: str) -> float:
    """A uniform draw in [0, 1) that is a pure function of ``key``: ``u64(key) / 2**64``."""
    return u64(key) / 2.0**64


def seed32(key: str) -> int:
    """First 4 bytes (big-endian) of SHA-256(key): the episode-seed convention."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:4], "big")
