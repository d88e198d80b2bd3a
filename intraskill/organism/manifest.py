"""The organism's warm-start manifests (``manifest.json``), typed: the warm start's (``intraskill-warmstart-v1``)
and the Skill1 warm start's (``intraskill-skill1-warmstart-v1``). Each holds the checkpoint's identity, the
parameters and seeds it was made from, the demonstrations and behaviour-cloning records, the checkpoint's file
digests, the timings and the val metrics: bare, with S₀ and each chunk alone; for Skill1, the Skill1 path against
bare with its replies, ranking and distilled lessons.

The parameter, demonstration and cloning blocks are the sections' own records (free-form objects); the metrics
are typed. Shipped warm starts (``params/*_warmstart``, ``data/results``) load as these models.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from intraskill.record import Record

MANIFEST_SCHEMA_VERSION = "intraskill-warmstart-v1"
SKILL1_MANIFEST_SCHEMA_VERSION = "intraskill-skill1-warmstart-v1"


class ArmMetrics(Record):
    """One val arm: episodes, scored, success and reward (unscored count 0), error rates per turn, turns and
    terminations (:func:`~intraskill.organism.truth.arm_metrics`)."""

    episodes: int
    scored: int
    success: float
    reward: float
    protocol_error_rate: float
    invalid_action_rate: float
    mean_turns: float
    terminations: dict[str, int]


class WarmstartMetrics(Record):
    split: str
    bare: ArmMetrics
    s0: ArmMetrics
    alone: dict[str, ArmMetrics]
    eval_wall_s: dict[str, float]


class Cloned:
    """A manifest with a behaviour-cloning block ``bc`` (its ``losses``: ``[step, loss]`` pairs; the field is the
    manifest's own, declared where its place in the file is)."""

    @property
    def final_loss(self) -> float:
        """The last logged behaviour-cloning loss."""
        return float(self.bc["losses"][-1][1])  # type: ignore[attr-defined]


class CloningStage(Record):
    """A finished behaviour-cloning stage (``bc.json``): what it was trained from (``identity``), the seconds its
    demonstrations took, the steps (``resumed_at``: the step a killed run continued from), tokens, the losses as
    ``[step, loss]`` pairs and the seconds of cloning. An interrupted warm start resumes from it."""

    identity: dict[str, Any]
    demos_s: float
    steps: int
    resumed_at: int
    tokens: int
    losses: list[tuple[int, float]]
    wall_s: float

    @classmethod
    def finished(cls, path: Path, identity: dict[str, Any]) -> Any:
        """The stage recorded at ``path`` when it was made from ``identity`` (compared as JSON), else ``None``."""
        data = json.loads(path.read_text(encoding="utf-8"))
        return cls.from_dict(data, str(path)) if data.get("identity") == json.loads(json.dumps(identity)) else None


class WarmstartCloning(CloningStage):
    """The warm start's cloning stage (:func:`~intraskill.organism.warmstart.run_warmstart`): its demonstrations
    (count, expert success), the drill and next-token steps, and the training data's counts (``data``)."""

    episodes: int
    expert_success: float
    drill_steps: int
    lookup_drill_steps: int
    lm_steps: int
    data: dict[str, Any]


class Skill1Cloning(CloningStage):
    """The Skill1 warm start's cloning stage (:func:`~intraskill.organism.skill1_warmstart.run_skill1_warmstart`):
    the examples kept and dropped as too long, supervised tokens, the demonstrations' digest and summary, and the
    replayed ordinary demonstrations."""

    examples: int
    dropped_too_long: int
    supervised_tokens: int
    demos_sha256: str
    skill1_demos: dict[str, Any]
    replay_demos: int


class WarmstartManifest(Cloned, Record):
    """A finished warm start (:func:`~intraskill.organism.warmstart.run_warmstart`)."""

    schema_version: Literal[MANIFEST_SCHEMA_VERSION] = MANIFEST_SCHEMA_VERSION
    checkpoint_sha256: str
    bank_sha256: str
    catalog_sha256: str
    params: dict[str, Any]
    seeds: dict[str, int]
    demos: dict[str, Any]
    bc: dict[str, Any]
    files: dict[str, str]
    timings: dict[str, float]
    metrics: WarmstartMetrics
    ground_truth_file: str


class PairedSuccess(Record):
    """Success bare and through the Skill1 path on the same tasks and episode seeds: the difference
    (Skill1 − bare), its paired bootstrap 95 % CI and the pair count."""

    bare: float
    skill1: float
    difference: float
    ci95: tuple[float, float]
    pairs: int


class RoleSuccess(Record):
    """The episodes whose selected strategy has one planted role (``bare``: none selected), bare and Skill1."""

    episodes: int
    bare_success: float
    skill1_success: float


class RankingMetrics(Record):
    """The well-formed rank replies against planted usefulness (``None``: no episode to measure it on)."""

    ranked: int
    ndcg: float | None
    ndcg_retrieval_order: float | None
    top_helpful: float | None
    top_helpful_retrieval_order: float | None
    harmful_top: float | None
    harmful_last: float | None
    expert_order: float | None


class DistillMetrics(Record):
    """The well-formed distillation replies, the share naming a lesson's chunk and whose outcome matches."""

    well_formed: int
    names_a_chunk: float | None
    outcome_matches: float | None


class Skill1WarmstartMetrics(Record):
    """The Skill1 warm start on val (:func:`~intraskill.organism.skill1_warmstart.skill1_eval_metrics`): protocol
    errors and replies per reply type (``query``, ``rank``, ``act``, ``distill``), failures by ``kind:code``, the
    paired success, success by the selected strategy's role, the ranking, the distillations and both arms."""

    split: str
    episodes: int
    protocol_error_rate: dict[str, float]
    protocol_errors: dict[str, int]
    replies: dict[str, int]
    failures: dict[str, int]
    success: PairedSuccess
    by_selected_role: dict[str, RoleSuccess]
    ranking: RankingMetrics
    distill: DistillMetrics
    skill1_episodes: ArmMetrics
    bare_episodes: ArmMetrics


class BaseWarmstart(Record):
    """The warm start a Skill1 warm start continues: its directory and weights."""

    dir: str
    checkpoint_sha256: str


class Skill1WarmstartManifest(Cloned, Record):
    """A finished Skill1 warm start (:func:`~intraskill.organism.skill1_warmstart.run_skill1_warmstart`)."""

    schema_version: Literal[SKILL1_MANIFEST_SCHEMA_VERSION] = SKILL1_MANIFEST_SCHEMA_VERSION
    checkpoint_sha256: str
    base: BaseWarmstart
    bank_sha256: str
    catalog_sha256: str
    encoder: dict[str, str]
    params: dict[str, Any]
    lessons: dict[str, Any]
    seeds: dict[str, int]
    demos: dict[str, Any]
    bc: dict[str, Any]
    files: dict[str, str]
    timings: dict[str, float]
    metrics: Skill1WarmstartMetrics


def read_manifest(path: str | Path) -> WarmstartManifest | Skill1WarmstartManifest:
    """The manifest at ``path`` as the model its ``schema_version`` names (:class:`ValueError` naming the file and
    field of a bad one)."""
    found = json.loads(Path(path).read_text(encoding="utf-8")).get("schema_version")
    model = Skill1WarmstartManifest if found == SKILL1_MANIFEST_SCHEMA_VERSION else WarmstartManifest
    return model.read(path)
