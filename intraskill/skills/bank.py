"""The SkillBank file (``shopsimrl-skillbank-v1``): typed records, validation, hashing, load/save.

Reference: docs/method.md §1.1 (bank and skill fields), §1.3 (versions) and
docs/release.md §0 (``content_sha256`` = SHA-256 of ``json.dumps(content, ensure_ascii=False)``).
A bank's identity is the SHA-256 of the canonical JSON of its normalized record (sorted keys,
compact separators, non-ASCII kept).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from intraskill.hashing import sha256_json, sha256_text
from intraskill.jsonl import write_json

SKILLBANK_SCHEMA_VERSION = "shopsimrl-skillbank-v1"
_BANK_KEYS = {"schema_version", "bank_version", "metadata", "skills"}
_SKILL_KEYS = {"skill_id", "content", "version", "enabled", "task_ids", "metadata", "content_sha256"}


class SkillBankError(ValueError):
    """A SkillBank (or one of its skills) violates the schema; the message names the field."""


def content_sha256(content: str) -> str:
    """The release's content hash: SHA-256 of ``json.dumps(content, ensure_ascii=False)``."""
    return sha256_text(json.dumps(content, ensure_ascii=False))


@dataclass(frozen=True)
class Skill:
    """One chunk of the bank: a Markdown procedure with a stable logical ID and a version.

    ``metadata`` is free-form; on active chunks ``estimated_effect`` is the gate coefficient α_j.
    ``task_ids`` (when not ``None``) restricts the skill to those tasks; IntraSkill uses global skills.
    """

    skill_id: str
    content: str
    version: str = "1"
    enabled: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)
    task_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        problem = _skill_problem(self.skill_id, self.content, self.version, self.enabled, self.metadata)
        if problem:
            raise SkillBankError(f"skill {self.skill_id!r}.{problem}")

    @property
    def content_sha256(self) -> str:
        """SHA-256 of the JSON-encoded content (release convention)."""
        return content_sha256(self.content)

    @property
    def estimated_effect(self) -> float | None:
        """``metadata.estimated_effect`` (the gate's α_j), or ``None`` when absent."""
        value = self.metadata.get("estimated_effect")
        return None if value is None else float(value)

    def to_dict(self) -> dict[str, Any]:
        """The normalized file record, including the derived ``content_sha256``."""
        record: dict[str, Any] = {
            "skill_id": self.skill_id,
            "version": self.version,
            "enabled": self.enabled,
            "content": self.content,
            "metadata": self.metadata,
            "content_sha256": self.content_sha256,
        }
        if self.task_ids is not None:
            record["task_ids"] = list(self.task_ids)
        return record

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "skill") -> "Skill":
        """Parse and validate one skill record; ``where`` prefixes error messages (e.g. ``skills[3]``)."""
        if not isinstance(data, Mapping):
            raise SkillBankError(f"{where}: expected an object, got {type(data).__name__}")
        unknown = sorted(set(data) - _SKILL_KEYS)
        if unknown:
            raise SkillBankError(f"{where}: unknown field(s) {unknown}")
        for key in ("skill_id", "content"):
            if key not in data:
                raise SkillBankError(f"{where}.{key}: missing")
        task_ids = data.get("task_ids")
        if task_ids is not None:
            if not isinstance(task_ids, list) or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in task_ids
            ):
                raise SkillBankError(f"{where}.task_ids: expected a list of integers")
            task_ids = tuple(task_ids)
        metadata = data.get("metadata", {})
        if not isinstance(metadata, Mapping):
            raise SkillBankError(f"{where}.metadata: expected an object")
        fields = {
            "skill_id": data["skill_id"],
            "content": data["content"],
            "version": data.get("version", "1"),
            "enabled": data.get("enabled", True),
            "metadata": dict(metadata),
        }
        problem = _skill_problem(**fields)
        if problem:
            raise SkillBankError(f"{where}.{problem}")
        skill = cls(**fields, task_ids=task_ids)
        recorded = data.get("content_sha256")
        if recorded is not None and recorded != skill.content_sha256:
            raise SkillBankError(
                f"{where}.content_sha256: recorded {recorded} but the content hashes to "
                f"{skill.content_sha256}"
            )
        return skill


def _skill_problem(
    skill_id: Any, content: Any, version: Any, enabled: Any, metadata: Mapping[str, Any]
) -> str | None:
    """``"field: reason"`` for the first invalid skill field, or ``None``."""
    if not isinstance(skill_id, str) or not skill_id.strip():
        return "skill_id: must be a non-empty string"
    if not isinstance(content, str) or not content.strip():
        return "content: must be non-empty Markdown text"
    if not isinstance(version, str) or not version:
        return "version: must be a non-empty string"
    if not isinstance(enabled, bool):
        return "enabled: must be true or false"
    effect = metadata.get("estimated_effect")
    if effect is not None and (
        isinstance(effect, bool) or not isinstance(effect, (int, float)) or not math.isfinite(effect)
    ):
        return f"metadata.estimated_effect: must be a finite number, got {effect!r}"
    return None


@dataclass(frozen=True)
class SkillBank:
    """A versioned, ordered set of skills. Order is the injection order (bank order)."""

    bank_version: str
    skills: tuple[Skill, ...]
    metadata: dict[str, Any] = field(default_factory=dict)
    schema_version: str = SKILLBANK_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.schema_version != SKILLBANK_SCHEMA_VERSION:
            raise SkillBankError(
                f"schema_version: expected {SKILLBANK_SCHEMA_VERSION!r}, got {self.schema_version!r}"
            )
        if not isinstance(self.bank_version, str) or not self.bank_version:
            raise SkillBankError("bank_version: must be a non-empty string")
        seen: set[str] = set()
        for index, skill in enumerate(self.skills):
            if skill.skill_id in seen:
                raise SkillBankError(f"skills[{index}].skill_id: duplicate {skill.skill_id!r}")
            seen.add(skill.skill_id)

    @property
    def sha256(self) -> str:
        """Bank identity: SHA-256 of the canonical JSON of :meth:`to_dict`."""
        return sha256_json(self.to_dict())

    def enabled_skills(self) -> list[Skill]:
        """The enabled skills in bank order."""
        return [skill for skill in self.skills if skill.enabled]

    def get(self, skill_id: str) -> Skill:
        """The skill with ``skill_id``; ``KeyError`` naming it otherwise."""
        for skill in self.skills:
            if skill.skill_id == skill_id:
                return skill
        raise KeyError(f"skill_id {skill_id!r} is not in bank {self.bank_version!r}")

    def provider_identity(self, max_skills: int | None = None) -> dict[str, Any]:
        """The provider identity runs record.

        {provider, schema_version, bank_version, bank_sha256, max_skills}; ``max_skills`` below the
        number of enabled chunks is refused (it would silently truncate injection, method §1.1).
        """
        if max_skills is not None and max_skills < len(self.enabled_skills()):
            raise SkillBankError(
                f"max_skills: {max_skills} would silently drop chunks; "
                f"use None or >= {len(self.enabled_skills())}"
            )
        return {
            "provider": "json_skillbank",
            "schema_version": self.schema_version,
            "bank_version": self.bank_version,
            "bank_sha256": self.sha256,
            "max_skills": max_skills,
        }

    def to_dict(self) -> dict[str, Any]:
        """The normalized file record."""
        return {
            "schema_version": self.schema_version,
            "bank_version": self.bank_version,
            "metadata": self.metadata,
            "skills": [skill.to_dict() for skill in self.skills],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "SkillBank":
        """Parse and validate a bank object (errors name the offending field)."""
        if not isinstance(data, Mapping):
            raise SkillBankError(f"bank: expected a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - _BANK_KEYS)
        if unknown:
            raise SkillBankError(f"bank: unknown field(s) {unknown}")
        for key in ("schema_version", "bank_version", "skills"):
            if key not in data:
                raise SkillBankError(f"{key}: missing")
        metadata = data.get("metadata") or {}
        if not isinstance(metadata, Mapping):
            raise SkillBankError("metadata: expected an object")
        if not isinstance(data["skills"], list):
            raise SkillBankError("skills: expected a list")
        skills = tuple(Skill.from_dict(item, f"skills[{i}]") for i, item in enumerate(data["skills"]))
        return cls(
            bank_version=data["bank_version"],
            skills=skills,
            metadata=dict(metadata),
            schema_version=data["schema_version"],
        )


def load_skillbank(path: str | Path) -> SkillBank:
    """Read and validate a SkillBank JSON file (any line endings; UTF-8)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise SkillBankError(f"{path}: not valid JSON ({error})") from None
    try:
        return SkillBank.from_dict(data)
    except SkillBankError as error:
        raise SkillBankError(f"{path}: {error}") from None


def save_skillbank(bank: SkillBank, path: str | Path) -> Path:
    """Write the normalized bank as indented UTF-8 JSON (LF, trailing newline); returns the path."""
    path = Path(path)
    write_json(path, bank.to_dict())
    return path


def skills_from_records(records: Sequence[Mapping[str, Any]], where: str = "skills") -> list[Skill]:
    """Parse a list of skill records (as stored in traces or curriculum files)."""
    return [Skill.from_dict(item, f"{where}[{i}]") for i, item in enumerate(records)]
