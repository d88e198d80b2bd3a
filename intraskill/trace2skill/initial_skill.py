"""The holistic initial skill compiler: all clusters → at most 16 independently maskable draft chunks.

Reference: docs/method.md §4.1 (the Holistic Initial Skill Compiler: ``{validation_dimension_cap: 16,
cluster_summaries}`` → ``submit_initial_skill`` {skill_title, chunks[{title, workflow_stage, applicable_when,
procedure[], verification, common_failure, evidence_cluster_ids}], evidence_only_cluster_ids,
conflicts_resolved[]}; every cluster accounted for exactly once; ≤ 16 chunks; 5 attempts with repair), §1.2
(chunk IDs: the ASCII slug of the title, else ``chunk-`` + the first 12 hex characters of the fingerprint of
{title, sorted evidence_cluster_ids}; collisions get ``-2``, ``-3``, …; ``order`` runs 1..M), §1.3 (version
``draft-1``), §1.1 (``draft_only: true``) and §4.4 step 4 (``initial_skill_draft.json``,
``shopsimrl-initial-skill-draft-v2``, gate_status ``not_run``).

:func:`rule_compile_initial` merges the clusters of each known mechanism (both channels, every batch) into that
mechanism's chunk template, ordered by the workflow skeleton then by evidence; :class:`LLMInitialCompiler` asks a
model. Both go through :func:`validate_initial_skill`, which also applies the gold firewall.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from intraskill.chat.base import Policy
from intraskill.hashing import sha256_json
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import Chunk, render_chunk
from intraskill.trace2skill.consolidation import Cluster
from intraskill.trace2skill.firewall import GoldLookup, check_payload
from intraskill.trace2skill.mechanisms import MECHANISMS
from intraskill.trace2skill.roles import (
    COMPILER_ROLE,
    INITIAL_COMPILER_PROMPT,
    INITIAL_SKILL_TOOL,
    RoleConfig,
    call_structured,
    require_each_once,
)

DRAFT_SCHEMA_VERSION = "shopsimrl-initial-skill-draft-v2"
DRAFT_VERSION = "draft-1"
DRAFT_BANK_VERSION = "cold-start-draft-v2"
WORKFLOW_STAGES = ("query formulation", "explicit constraints", "persona-grounded preferences",
                   "candidate inspection and comparison", "variant and price verification",
                   "backtracking and purchase termination")
"""The workflow skeleton the compiler organizes by (the rule compiler's chunk order)."""
_SLUG = re.compile(r"[a-z0-9]+")


class InitialSkillError(ValueError):
    """A ``submit_initial_skill`` object is invalid; the message names the field."""


@dataclass(frozen=True)
class DraftChunk:
    """One draft chunk: its ID, 1-based order, workflow stage, text and the clusters behind it."""

    chunk_id: str
    order: int
    workflow_stage: str
    chunk: Chunk
    evidence_cluster_ids: tuple[str, ...]

    @property
    def content(self) -> str:
        return render_chunk(self.chunk)

    def skill(self) -> Skill:
        """The chunk as a draft skill (version ``draft-1``, ``draft_only``)."""
        return Skill(self.chunk_id, self.content, version=DRAFT_VERSION, metadata={
            "draft_only": True, "draft_order": self.order, "title": self.chunk.title,
            "workflow_stage": self.workflow_stage, "evidence_cluster_ids": list(self.evidence_cluster_ids)})

    def to_dict(self) -> dict[str, Any]:
        return {"chunk_id": self.chunk_id, "order": self.order, "title": self.chunk.title,
                "workflow_stage": self.workflow_stage, "applicable_when": self.chunk.applicable_when,
                "procedure": list(self.chunk.procedure), "verification": self.chunk.verification,
                "common_failure": self.chunk.common_failure,
                "evidence_cluster_ids": list(self.evidence_cluster_ids), "content": self.content}


@dataclass(frozen=True)
class InitialSkill:
    """A validated initial skill draft: its chunks in order and the clusters left as evidence only."""

    skill_title: str
    chunks: tuple[DraftChunk, ...]
    evidence_only_cluster_ids: tuple[str, ...]
    conflicts_resolved: tuple[str, ...]

    def bank(self) -> SkillBank:
        """The draft bank (``initial_skillbank.json``): ``draft_only``, chunks in order."""
        return SkillBank(DRAFT_BANK_VERSION, tuple(c.skill() for c in self.chunks),
                         {"draft_only": True, "skill_title": self.skill_title})

    def to_dict(self, active_skill_budget: int, validation_dimension_cap: int,
                compilation_input_sha256: str) -> dict[str, Any]:
        """``initial_skill_draft.json``."""
        return {"schema_version": DRAFT_SCHEMA_VERSION, "gate_status": "not_run",
                "active_skill_budget": active_skill_budget, "validation_dimension_cap": validation_dimension_cap,
                "compilation_input_sha256": compilation_input_sha256, "skill_title": self.skill_title,
                "chunks": [c.to_dict() for c in self.chunks],
                "evidence_only_cluster_ids": list(self.evidence_only_cluster_ids),
                "conflicts_resolved": list(self.conflicts_resolved)}

    def markdown(self) -> str:
        """``initial_skill_draft.md``: the title, a note, then each chunk in order."""
        parts = [f"# {self.skill_title}", "",
                 f"Draft (version {DRAFT_VERSION}, not validated): {len(self.chunks)} chunks; Gate A selects the "
                 "active bank."]
        for chunk in self.chunks:
            parts += ["", f"<!-- {chunk.chunk_id} (order {chunk.order}, {chunk.workflow_stage}) -->", chunk.content]
        return "\n".join(parts) + "\n"


def chunk_ids(titles_and_clusters: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """Draft chunk IDs in order: the title's ASCII slug, else ``chunk-`` + 12 hex of the fingerprint of
    {title, sorted evidence_cluster_ids}; a repeated ID gets ``-2``, ``-3``, …

    Examples
    --------
    >>> chunk_ids([("Check the budget!", ["c1"]), ("check   the budget", ["c2"])])
    ['check-the-budget', 'check-the-budget-2']
    >>> chunk_ids([("核对预算", ["c1"])])[0].startswith("chunk-")
    True
    """
    ids: list[str] = []
    for title, clusters in titles_and_clusters:
        base = "-".join(_SLUG.findall(title.casefold().encode("ascii", "ignore").decode()))
        if not base:
            base = "chunk-" + sha256_json({"title": title, "evidence_cluster_ids": sorted(clusters)})[:12]
        ident, suffix = base, 2
        while ident in ids:
            ident, suffix = f"{base}-{suffix}", suffix + 1
        ids.append(ident)
    return ids


def compiler_input(clusters: Sequence[Cluster], validation_dimension_cap: int) -> dict[str, Any]:
    """The compiler's input object: the cap and every cluster's summary."""
    return {"validation_dimension_cap": validation_dimension_cap,
            "cluster_summaries": [c.summary() for c in clusters]}


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InitialSkillError(f"{where}: must be a non-empty string")
    return value


def validate_initial_skill(arguments: Mapping[str, Any], cluster_ids: Sequence[str], validation_dimension_cap: int,
                           lookup: GoldLookup | None = None) -> InitialSkill:
    """Check a ``submit_initial_skill`` object and build the draft (IDs and order assigned).

    At most ``validation_dimension_cap`` chunks (at least one), every chunk a valid template chunk, every cluster
    exactly once (in one chunk's evidence or evidence-only), no gold-firewall finding.
    """
    title = _text(arguments.get("skill_title"), "skill_title")
    chunks = arguments.get("chunks")
    if not isinstance(chunks, list) or not chunks:
        raise InitialSkillError("chunks: expected a non-empty list")
    if len(chunks) > validation_dimension_cap:
        raise InitialSkillError(f"chunks: {len(chunks)} submitted, at most {validation_dimension_cap} allowed")
    parsed: list[tuple[str, Chunk, tuple[str, ...]]] = []
    cited: list[str] = []
    for index, raw in enumerate(chunks):
        where = f"chunks[{index}]"
        if not isinstance(raw, Mapping):
            raise InitialSkillError(f"{where}: expected an object")
        procedure, evidence = raw.get("procedure"), raw.get("evidence_cluster_ids")
        for key, value in (("procedure", procedure), ("evidence_cluster_ids", evidence)):
            if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
                raise InitialSkillError(f"{where}.{key}: must be a non-empty list of strings")
        try:
            chunk = Chunk(_text(raw.get("title"), f"{where}.title"), raw.get("applicable_when"), tuple(procedure),
                          raw.get("verification"), raw.get("common_failure"))
        except ValueError as error:
            raise InitialSkillError(f"{where}.{str(error).removeprefix('chunk.')}") from None
        stage = _text(raw.get("workflow_stage"), f"{where}.workflow_stage")
        check_payload({k: v for k, v in raw.items() if k != "evidence_cluster_ids"}, lookup, where)
        parsed.append((stage, chunk, tuple(evidence)))
        cited += evidence
    check_payload({"skill_title": title}, lookup, "skill_title")
    evidence_only = arguments.get("evidence_only_cluster_ids") or []
    conflicts = arguments.get("conflicts_resolved") or []
    for key, value in (("evidence_only_cluster_ids", evidence_only), ("conflicts_resolved", conflicts)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise InitialSkillError(f"{key}: expected a list of strings")
    check_payload({"conflicts_resolved": conflicts}, lookup, "conflicts_resolved")
    cited += evidence_only
    require_each_once(cited, cluster_ids, "evidence_cluster_ids", "cluster", InitialSkillError)
    ids = chunk_ids([(chunk.title, evidence) for _, chunk, evidence in parsed])
    drafts = tuple(DraftChunk(ident, order, stage, chunk, evidence)
                   for order, (ident, (stage, chunk, evidence)) in enumerate(zip(ids, parsed), start=1))
    return InitialSkill(title, drafts, tuple(evidence_only), tuple(conflicts))


@dataclass(frozen=True)
class CompiledDraft:
    """The compiler's validated draft and its invalid attempts (``compiler_invalid_attempts.jsonl``)."""

    skill: InitialSkill
    invalid_attempts: tuple[dict[str, Any], ...] = ()


def _stage_rank(stage: str) -> int:
    return WORKFLOW_STAGES.index(stage) if stage in WORKFLOW_STAGES else len(WORKFLOW_STAGES)


def rule_compile_initial(clusters: Sequence[Cluster], validation_dimension_cap: int,
                         lookup: GoldLookup | None = None) -> CompiledDraft:
    """One chunk per known mechanism (its template), merging that mechanism's clusters of both channels; chunks
    ordered by workflow stage, then evidence (most first); unknown mechanisms and chunks beyond the cap are
    evidence only."""
    groups: dict[str, list[Cluster]] = {}
    unknown = []
    for cluster in clusters:
        if cluster.mechanism in MECHANISMS:
            groups.setdefault(cluster.mechanism, []).append(cluster)
        else:
            unknown.append(cluster.cluster_id)
    evidence = {key: sum(len(c.evidence_card_ids) for c in members) for key, members in groups.items()}
    by_support = sorted(groups, key=lambda key: (-evidence[key], list(MECHANISMS).index(key)))
    kept = set(by_support[:validation_dimension_cap])
    order = sorted(kept, key=lambda key: (_stage_rank(MECHANISMS[key].workflow_stage), -evidence[key],
                                          list(MECHANISMS).index(key)))
    chunks = []
    for key in order:
        mechanism = MECHANISMS[key]
        chunk = mechanism.chunk
        chunks.append({"title": chunk.title, "workflow_stage": mechanism.workflow_stage,
                       "applicable_when": chunk.applicable_when, "procedure": list(chunk.procedure),
                       "verification": chunk.verification, "common_failure": chunk.common_failure,
                       "evidence_cluster_ids": [c.cluster_id for c in groups[key]]})
    left = [c.cluster_id for key in by_support[validation_dimension_cap:] for c in groups[key]] + unknown
    submission = {"skill_title": "Shopping procedure", "chunks": chunks, "evidence_only_cluster_ids": left,
                  "conflicts_resolved": []}
    return CompiledDraft(validate_initial_skill(submission, [c.cluster_id for c in clusters],
                                                validation_dimension_cap, lookup))


class LLMInitialCompiler:
    """The holistic compiler role over a model (5 attempts with repair messages by default)."""

    def __init__(self, policy: Policy, config: RoleConfig = COMPILER_ROLE) -> None:
        self.policy = policy
        self.config = config

    def __call__(self, clusters: Sequence[Cluster], validation_dimension_cap: int,
                 lookup: GoldLookup | None = None) -> CompiledDraft:
        """Raises :class:`~intraskill.trace2skill.roles.RoleFailure` (with every attempt) when exhausted."""
        payload = compiler_input(clusters, validation_dimension_cap)
        messages = [{"role": "system", "content": INITIAL_COMPILER_PROMPT},
                    {"role": "user", "content": json.dumps(payload, ensure_ascii=False, sort_keys=True)}]
        ids = [c.cluster_id for c in clusters]
        result = call_structured(self.policy, "initial-compiler", messages, INITIAL_SKILL_TOOL,
                                 lambda args: validate_initial_skill(args, ids, validation_dimension_cap, lookup),
                                 self.config)
        return CompiledDraft(result.value, tuple(result.attempts))
