"""Parameter sets (``params/*.yaml``) validated with pydantic before any work starts.

Unknown keys are errors (typos never pass silently) and every error names its field path,
e.g. ``grpo.eps_high: Input should be greater than 0``.

Types are strict: a boolean is never an integer or a number and a string never a number (an integer is a
valid number: ``lr: 1`` is 1.0). The YAML reader refuses duplicate keys and reads YAML 1.2 floats such as
``1e-4`` as numbers; a syntax error, a tab, an unknown tag or a duplicate key is one :class:`ParamsError`
line naming ``file:line:column``.

Paths stay inside the run root: ``experiment.run_root`` is absolute (the user's explicit choice) or
relative to the project root without ``..``; ``experiment.name`` (the run's folder under the run root),
``warmstart.out_dir`` and ``skill1_warmstart.out_dir`` (relative to the project root, or absolute inside the
run root) may not be absolute nor climb with ``..``. ``experiment.allow_outside_run_root: true`` lifts these path rules.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from intraskill.paths import runs_root

RELEASE_SEED = 20260901
"""The release's seed, written once: the default of the experiment, bootstrap, curriculum and warm-start
seeds below, of the gate's mask draws and of the test bootstrap."""
STORE_SEED = 20260829
"""The synthetic catalogue's and its splits' seed, written once (``store.seed``)."""
SAMPLES_PER_TASK = 1
"""m: masked gate rollouts per val task in the release (``gate.samples_per_task``)."""
ACTIVE_SKILL_BUDGET = 10
"""K: the active skill budget, the strictly positive top-K a gate keeps (docs/method.md §1.5)."""
RANKING_K = 4
"""Chunks per arm of the gate's ranking check (top-K, bottom-K, random-K)."""
RANKING_RANDOM_SEED = 20260907
"""The release appendix's random-4 seed (the ranking check's random arm)."""
MAX_CANDIDATES = 6
"""ADD/REWRITE candidates the online compiler may put in a round's pool."""
MAX_CANDIDATES_LIMITS = (1, 16)
"""The range of the per-round candidate cap."""
DEFAULT_CONFIDENCE = 0.95
"""The two-sided level of the control matrix's intervals and its family-wise level (α = 1 − it)."""


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
    """``allow_inf_nan=False``: every float field (nested in tuples and mappings too) refuses ``.inf`` and
    ``.nan``."""

    plan_optional: ClassVar[tuple[str, ...]] = ()
    """Fields added after plans were first written: :func:`section_plan` leaves them out at their defaults."""
    plan_excluded: ClassVar[tuple[str, ...]] = ()
    """Fields no result depends on (how work is batched): :func:`section_plan` always leaves them out."""


def _tuple_from_list(value: Any) -> Any:
    """YAML and JSON have no tuples: a list is accepted for a tuple field (its items stay strict)."""
    return tuple(value) if isinstance(value, list) else value


FloatPair = Annotated[tuple[float, float], BeforeValidator(_tuple_from_list)]
TrackerName = Literal["wandb", "tensorboard", "trackio"]
"""The experiment trackers ``round.report_to`` may name (:mod:`intraskill.pipeline.trackers`)."""
Names = Annotated[tuple[str, ...], BeforeValidator(_tuple_from_list)]


class ExperimentParams(_Section):
    """Run identity and where runs live (see the module docstring for the path rules)."""

    name: str = Field(min_length=1)
    seed: int = RELEASE_SEED
    run_root: str = "runs"
    allow_outside_run_root: bool = False
    """Allow an absolute or ``..`` ``experiment.name``, a ``..`` run root and a ``warmstart.out_dir`` outside."""


class StoreParams(_Section):
    """The store: the catalogue (synthetic by scale and seed, or ShopSimulator's own files) and the reference
    protocol limits (20 / 150 / 30)."""

    scale: Literal["default", "small"] = "default"
    seed: int = STORE_SEED
    source: str | None = Field(None, min_length=1)
    """A ShopSimulator ``shop_env`` directory (absolute or relative to the project root) whose published files the
    store is built from (``intraskill env build --from-shopsimulator``); ``null`` = the synthetic catalogue of
    ``scale`` and ``seed``, which a source leaves unused. Left out of dumps while null, so plans and warm-start
    manifests of synthetic stores keep their fingerprints."""
    page_size: int = Field(20, ge=1, le=20)
    top_k: int = Field(150, ge=1)
    max_actions: int = Field(30, ge=1)
    language: Literal["en", "zh"] = "en"

    @model_serializer(mode="wrap")
    def _source_only_when_set(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if self.source is None:
            del data["source"]
        return data


class OrganismParams(_Section):
    """Shape of the tiny Qwen3-architecture organism and its domain tokenizer."""

    vocab_size: int = Field(2048, ge=300)
    hidden_size: int = Field(256, ge=16)
    num_layers: int = Field(2, ge=1)
    num_heads: int = Field(4, ge=1)
    num_kv_heads: int = Field(2, ge=1)
    intermediate_size: int = Field(768, ge=16)
    max_position: int = Field(8192, ge=256)

    @model_validator(mode="after")
    def _heads_divide(self) -> "OrganismParams":
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be divisible by num_kv_heads ({self.num_kv_heads})")
        return self


UNTRAINED = "untrained"
"""``model.checkpoint`` value naming the randomly initialised organism (never chosen by default)."""


class ModelParams(_Section):
    """Which policy: ``organism``, ``smollm2``, a local HF directory, or ``openai:<base_url>#<model>``.

    ``checkpoint``: a checkpoint directory; ``null`` = for the organism the warm start whose manifest matches
    (:func:`intraskill.policy.warmstarts.resolve_checkpoint`), for other specs their own weights;
    ``untrained`` = the randomly initialised organism.
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("house_codes",)

    spec: str = "organism"
    checkpoint: str | None = None
    device: Literal["cpu", "cuda", "auto"] = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    view: Literal["standard", "compact", "compact_hints", "reader"] = "standard"  # compact*, reader: short pages
    house_codes: int | None = None
    """Seed of the store's house codes (the reader testbed, ``docs/testbed.md``): the profile's colour is shown as
    a code word only skill instructions translate; ``null`` shows the profile as it is. Needs ``view: reader``."""
    organism: OrganismParams = OrganismParams()

    @model_validator(mode="after")
    def _untrained_is_the_organism(self) -> "ModelParams":
        if self.checkpoint == UNTRAINED and self.spec != "organism":
            raise ValueError(f"checkpoint: {UNTRAINED} names the random-init organism; spec is {self.spec!r}")
        if self.house_codes is not None and self.view != "reader":
            raise ValueError(f"house_codes: needs view 'reader', got view {self.view!r}")
        return self


class SamplingParams(_Section):
    """Decoding and the episode budget (reference: temperature 0.6, top_p 1.0, 30 turns)."""

    temperature: float = Field(0.6, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens_per_turn: int = Field(4096, ge=1)
    max_turns: int = Field(30, ge=1)


class EvaluationParams(_Section):
    """Evaluation runs: repeats per task, the lockstep batch and the paired bootstrap."""

    plan_excluded: ClassVar[tuple[str, ...]] = ("batch_size",)

    repeats: int = Field(1, ge=1)
    task_limit: int | None = Field(None, ge=1)
    batch_size: int = Field(32, ge=1)
    """Episodes per lockstep batch of an evaluation run (and sessions per forward of its in-process model). No
    episode and no file depends on it where the model's arithmetic does not (:mod:`intraskill.evaluate.runner`):
    a larger batch spreads each decode step's fixed cost over more rows, a smaller one holds fewer KV caches."""
    bootstrap_samples: int = Field(10_000, ge=100)
    bootstrap_seed: int = RELEASE_SEED


class LoraParams(_Section):
    """LoRA adapters for the GRPO update (peft); ``null`` in ``grpo.lora`` means full fine-tuning."""

    rank: int = Field(16, ge=1)
    alpha: float = Field(32.0, gt=0.0)
    dropout: float = Field(0.0, ge=0.0, lt=1.0)
    target_modules: Names = Field(("q_proj", "k_proj", "v_proj", "o_proj"), min_length=1)


class GRPOParams(_Section):
    """The GRPO update (reference §6.3: clip 0.2 / 0.28, no KL, Adam lr 1e-6 constant, wd 0.1, β 0.9 / 0.98).

    ``global_batch_size`` counts episodes per optimizer update (whole groups); ``null`` = one update
    per rollout step. ``micro_batch_tokens`` bounds one padded micro-batch (rows × longest row).
    """

    lr: float = Field(1e-6, gt=0.0)
    eps_low: float = Field(0.2, ge=0.0, lt=1.0)
    eps_high: float = Field(0.28, ge=0.0)
    kl_coef: float = Field(0.0, ge=0.0)
    weight_decay: float = Field(0.1, ge=0.0)
    betas: FloatPair = (0.9, 0.98)
    max_grad_norm: float | None = Field(1.0, gt=0.0)
    micro_batch_tokens: int = Field(16384, ge=2)
    global_batch_size: int | None = Field(64, ge=1)
    lora: LoraParams | None = None
    autocast: Literal["auto", "bf16", "off"] = "auto"

    @model_validator(mode="after")
    def _betas_in_range(self) -> "GRPOParams":
        if not all(0.0 <= beta < 1.0 for beta in self.betas):
            raise ValueError(f"betas must both lie in [0, 1), got {list(self.betas)}")
        return self


class Skill1Params(_Section):
    """Skill1 (docs/method.md §10.2–§10.4): library, retrieval and objective (``skill1:``; used when
    ``round.method: skill1``).

    Paper values: N_max 5000, α 0.05, K 5 (the released scripts use 3), λ1 = λ2 = 0.3. ``retrieval`` is Eq. 3's
    pure cosine by default; ``"ucb"`` switches to SimUtil-UCB with the paper's w_sim 0.6 and scale 1.0 over
    skills with cosine ≥ 0.4. ``initial_utility`` 0.5 (RetroAgent's initial score) is this package's choice,
    the reference leaves it open (:mod:`intraskill.skills.library`). ``ndcg_cutoff`` 1 scores only the top
    choice (the scripts' ``rerank_train_top1``); ``null`` scores the whole ranking. ``seed_library`` is an
    optional JSON list of ``{"desc", "strat"[, "utility"][, "uses"]}`` skills a fresh library starts with
    (relative to the project root; ``null`` = start empty). ``*_max_tokens`` are the completion budgets of the
    query, rank and distillation replies. ``start_checkpoint`` is where a matrix's Skill1 arms start (relative
    to the project root; ``null``: the shared warm start): a Skill1 warm start (``make warmstart-skill1``), as a
    model cloned only on IntraSkill episodes writes no query, rank or distillation reply; an arm's own
    ``checkpoint`` takes precedence.

    The choices where the paper, its scripts and this package part (docs/skill1.md lists them with reasons):
    ``rerank_baseline`` (paper: ``none``, REINFORCE on the raw NDCG; ``random_order`` subtracts the expected NDCG
    of a random ordering of the same candidates, :mod:`intraskill.training.skill1_rewards`); ``objective``
    (``term_means``: J = J_util + λ1·J_rerank + λ2·J_distill with each term a mean over the update's rollouts
    of its per-token mean, the paper's; ``token_mean``: one token mean over every segment, λ folded into the
    advantages, so a segment weighs by its tokens); ``util_reward`` (paper: ``success``, r ∈ {0, 1}; ``strict``
    trains J_util on r_strict as plain GRPO does, while U, Û and admission keep r_success); ``oversample``
    (paper: off; on, a step plays ``round.over_sampling_batch_size`` groups and trains on the first
    ``round.rollout_batch_size`` whose J_util rewards vary, as the GRPO step does, every played rollout still
    updating the library); ``distill_context`` (paper: ``trajectory``, the distillation prompt holds the
    episode; ``actions``: one line per action) with ``distill_context_chars`` the trajectory's budget. K is
    ``top_k`` (paper 5, scripts 3) and G is ``round.n_samples_per_prompt`` (paper 16, scripts 8); the KL to the
    starting checkpoint is ``grpo.kl_coef`` (paper 0.01, low-variance k3).
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("query_max_tokens", "rank_max_tokens", "distill_max_tokens",
                                                "start_checkpoint", "rerank_baseline", "objective", "util_reward",
                                                "oversample", "distill_context", "distill_context_chars")

    capacity: int = Field(5000, ge=1)
    ema_rate: float = Field(0.05, gt=0.0, le=1.0)
    initial_utility: float = Field(0.5, ge=0.0, le=1.0)
    top_k: int = Field(5, ge=1)
    retrieval: Literal["cosine", "ucb"] = "cosine"
    ucb_weight: float = Field(0.6, ge=0.0, le=1.0)
    ucb_scale: float = Field(1.0, ge=0.0)
    ucb_min_similarity: float = Field(0.4, ge=-1.0, le=1.0)
    lambda_rerank: float = Field(0.3, ge=0.0)
    lambda_distill: float = Field(0.3, ge=0.0)
    ndcg_cutoff: int | None = Field(None, ge=1)
    seed_library: str | None = None
    query_max_tokens: int = Field(64, ge=1)
    rank_max_tokens: int = Field(32, ge=1)
    distill_max_tokens: int = Field(256, ge=1)
    start_checkpoint: str | None = Field(None, min_length=1)
    rerank_baseline: Literal["none", "random_order"] = "none"
    objective: Literal["token_mean", "term_means"] = "token_mean"
    util_reward: Literal["success", "strict"] = "success"
    oversample: bool = False
    distill_context: Literal["actions", "trajectory"] = "actions"
    distill_context_chars: int = Field(3000, ge=200)


MethodName = Literal["intraskill", "skill1"]
"""The training methods (``round.method``, an arm's ``method``)."""


@dataclass(frozen=True)
class MethodSpec:
    """What the parameters know of a training method. Its behaviour is the pipeline's
    (:class:`~intraskill.pipeline.methods.TrainingMethod`, which takes ``uses_curriculum`` from here); the
    parameters sit below the pipeline, so they check a method by these facts, never by its name."""

    uses_curriculum: bool
    """It trains with a skill bank's curriculum; one that does not needs ``round.skillbank: null``, and an arm of it
    needs ``skills: none`` and sets ``round.method`` (with no bank)."""
    starts_from_skill1: bool
    """Its arms start from ``skill1.start_checkpoint`` unless they name a ``checkpoint`` (or set ``skill1_start``)."""
    section: str | None
    """The parameter section only it reads (left out of the plans of runs of another method)."""


METHOD_SPECS: dict[MethodName, MethodSpec] = {
    "intraskill": MethodSpec(uses_curriculum=True, starts_from_skill1=False, section=None),
    "skill1": MethodSpec(uses_curriculum=False, starts_from_skill1=True, section="skill1"),
}
"""Every method's :class:`MethodSpec`, by name."""


class RoundParams(_Section):
    """One training round: rollout steps of oversampled GRPO groups with group-shared skill masks.

    Reference §3.4 / §6.3: 8 rollouts per group, 32 groups generated and 16 admitted per step,
    20 steps per round, q = 0.20, ρ ∈ [0.20, 0.90], curriculum seed ``RELEASE_SEED``, one full-skill retry
    per all-wrong group, at most 8 consecutive unscored groups. ``skillbank`` is the round's input
    bank S (path relative to the project root; ``null`` = no skills, every group skill-free).
    ``val_tasks`` is the number of val tasks of the before/after bare check (``null`` = the whole
    split, 0 = skip it). ``report_to`` logs each step's metrics to experiment trackers — ``wandb`` (offline),
    ``tensorboard``, ``trackio``, each an optional extra (:mod:`intraskill.pipeline.trackers`); trackers only
    observe, so they are in no plan. ``wandb_offline: true`` is ``report_to: [wandb]`` (kept for parameter files
    and plans written before ``report_to``).

    ``method`` selects what a rollout step does: ``intraskill`` (the curriculum's group-shared masks above) or
    ``skill1`` (Skill1's query → retrieve → rank → act → distill trajectory over its own library, the
    ``skill1:`` section; :mod:`intraskill.pipeline.skill1`). A Skill1 step draws ``rollout_batch_size`` tasks
    (the first tasks of the GRPO step's draw) with ``n_samples_per_prompt`` rollouts each and trains on all of
    them; ``skillbank`` must be ``null``, and ``q``, ``rho_*``, ``curriculum_seed``, ``full_skill_retry``,
    ``over_sampling_batch_size`` and ``max_consecutive_failed_groups`` mean nothing (there is no curriculum,
    retry or oversampling). Select it with ``--set round.method=skill1``.

    ``exclude_dev`` leaves the store's dev tasks (a subset of train carved for probes and tuning,
    :func:`~intraskill.shop.splits.carve_dev`) out of the tasks a round trains on (and a cold start reads), so that
    a probe may evaluate on dev; off, a round trains on the whole train split as before.
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("exclude_dev", "method")

    method: MethodName = "intraskill"
    n_samples_per_prompt: int = Field(8, ge=2)
    rollout_batch_size: int = Field(16, ge=1)
    over_sampling_batch_size: int = Field(32, ge=1, le=1000)
    rollout_steps: int = Field(20, ge=1)
    q: float = Field(0.20, ge=0.0, le=1.0)
    rho_min: float = Field(0.20, ge=0.0, le=1.0)
    rho_max: float = Field(0.90, ge=0.0, le=1.0)
    curriculum_seed: int = RELEASE_SEED
    skillbank: str | None = None
    full_skill_retry: bool = True
    max_consecutive_failed_groups: int = Field(8, ge=1)
    val_tasks: int | None = Field(None, ge=0)
    wandb_offline: bool = False
    report_to: Annotated[tuple[TrackerName, ...], BeforeValidator(_tuple_from_list)] = ()
    exclude_dev: bool = False

    @property
    def trackers(self) -> tuple[TrackerName, ...]:
        """The trackers a round logs to: ``report_to``, with ``wandb`` when ``wandb_offline``."""
        legacy: tuple[TrackerName, ...] = ("wandb",) if self.wandb_offline and "wandb" not in self.report_to else ()
        return tuple(dict.fromkeys(self.report_to)) + legacy

    @model_validator(mode="after")
    def _consistent(self) -> "RoundParams":
        if self.over_sampling_batch_size < self.rollout_batch_size:
            raise ValueError(
                f"over_sampling_batch_size ({self.over_sampling_batch_size}) must be >= "
                f"rollout_batch_size ({self.rollout_batch_size})"
            )
        if self.rho_min > self.rho_max:
            raise ValueError(f"rho_min ({self.rho_min}) must be <= rho_max ({self.rho_max})")
        if not METHOD_SPECS[self.method].uses_curriculum and self.skillbank is not None:
            raise ValueError(f"skillbank ({self.skillbank!r}) must be null for method: {self.method} (it trains "
                             "without a curriculum, from its own library)")
        return self


MAX_SUCCESS_CARDS = 2
"""Success-Analyst cards per successful trajectory (method §1.5)."""
CONSOLIDATION_BATCH = 40
"""Eligible cards per consolidation batch (method §1.5)."""
MAX_CLUSTERS = 12
"""Clusters per consolidation batch, at most (and at most the batch's size; method §1.5)."""
VALIDATION_DIMENSION_CAP = 16
"""Draft chunks the cold-start compiler may write, M_init (method §1.5; Gate A accepts 1–16)."""


class ColdStartParams(_Section):
    """The cold start (``intraskill cold-start``): S₀ induced from the base policy's train traces.

    Reference: docs/method.md §4.4 and the roles table of §4.1. ``trajectories`` train tasks (the first of
    the split, one rollout each; the release: 400) are played by the base policy (``model.checkpoint``) without
    skills; successes go to the Success Analyst (at most ``max_cards_per_success`` cards each), failures to the
    gold-aware Failure Analyst in a live session (ADD only); eligible cards are consolidated per channel in
    batches of ``consolidation_batch`` into at most ``max_clusters`` clusters per batch; the compiler drafts at
    most ``validation_dimension_cap`` chunks; Gate A runs on the first ``gate_tasks`` val tasks (``null`` =
    ``evaluation.task_limit``, then the whole split) with ``checkpoint_id`` naming the base checkpoint; Gate B
    reports the active S₀ against bare on the first ``gate_b_tasks`` test tasks (the same rule).
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("gate_b_tasks",)

    trajectories: int = Field(400, ge=1)
    max_cards_per_success: int = Field(MAX_SUCCESS_CARDS, ge=1, le=MAX_SUCCESS_CARDS)
    consolidation_batch: int = Field(CONSOLIDATION_BATCH, ge=1, le=CONSOLIDATION_BATCH)
    max_clusters: int = Field(MAX_CLUSTERS, ge=1, le=MAX_CLUSTERS)
    validation_dimension_cap: int = Field(VALIDATION_DIMENSION_CAP, ge=1, le=VALIDATION_DIMENSION_CAP)
    gate_tasks: int | None = Field(None, ge=1)
    gate_b_tasks: int | None = Field(None, ge=1)
    checkpoint_id: str = Field("base", min_length=1)


class GateParams(_Section):
    """The paired validation gate (``intraskill gate …``, the co-evolution's online gate, the cold start's Gate A).

    Reference: docs/method.md §1.5. ``active_skill_budget`` is K, the strictly positive top-K kept;
    ``samples_per_task`` is m, the masked rollouts per val task (the bare run gets m too); ``mask_seed`` seeds
    every mask draw; ``ranking_k`` and ``ranking_seed`` are the optional ranking check's chunks per arm and its
    random arm's seed. Left out of plans at its defaults, so plans written before the section keep their
    fingerprints.
    """

    active_skill_budget: int = Field(ACTIVE_SKILL_BUDGET, ge=1)
    samples_per_task: int = Field(SAMPLES_PER_TASK, ge=1)
    mask_seed: int = RELEASE_SEED
    ranking_k: int = Field(RANKING_K, ge=1)
    ranking_seed: int = RANKING_RANDOM_SEED


class CoevolveParams(_Section):
    """The co-evolution's analysis stage (``intraskill train co-evolve``): ``max_candidates`` ADD/REWRITE
    candidates per round's pool (1–16). Left out of plans at its defaults."""

    max_candidates: int = Field(MAX_CANDIDATES, ge=MAX_CANDIDATES_LIMITS[0], le=MAX_CANDIDATES_LIMITS[1])


class PlantedInteraction(_Section):
    """One planted pairwise interaction of the ``additive`` law: ``weight`` is added to the diligent probability
    when both ``chunks`` are in context (a complement when positive, substitutes when negative)."""

    chunks: Annotated[tuple[str, str], BeforeValidator(_tuple_from_list)]
    weight: float

    @model_validator(mode="after")
    def _two_chunks(self) -> "PlantedInteraction":
        if self.chunks[0] == self.chunks[1]:
            raise ValueError(f"chunks must name two different chunks, got {list(self.chunks)}")
        return self


class WarmstartParams(_Section):
    """The organism's behaviour-cloning warm start (``intraskill warmstart``).

    A skill-conditioned scripted expert plays ``demos`` train tasks under random chunk masks of the
    S₀ bank ``skills``; each competence runs with ``p_with[c]`` when its chunk is in context and
    ``p_without[c]`` otherwise (the harmful chunk's habit likewise), or with ``law: additive`` all of
    them with probability ``base`` plus the ``weights`` of the chunks in context. The organism is cloned from
    those demonstrations (loss on assistant tokens only), then evaluated bare and with S₀, and each
    chunk's true marginal effect is measured by a paired evaluation (chunk alone vs bare).

    The organism (``model.spec: organism``) is a random-init model trained in full; any other in-process spec
    (``smollm2``, a local HF directory) starts from its own weights and is cloned with LoRA adapters (``lora``,
    peft) or in full (``lora: null``), behaviour cloning only (no drills, no LM phase).
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("lora", "interactions", "cover", "max_chunks", "max_lines", "stray",
                                                "explore", "note", "lookup_drill_steps")

    skills: str = "params/organism_s0.json"
    """S₀ SkillBank: chunk metadata ``competence`` (helpful), ``habit`` (harmful) or neither (neutral)."""
    demos: int = Field(1200, ge=1)
    """Demonstration episodes (train tasks in split order, cycling when more than the split)."""
    mask_probability: float = Field(0.5, ge=0.0, le=1.0)
    """Each chunk is in a demonstration's context independently with this probability."""
    bare_share: float = Field(0.0, ge=0.0, le=1.0)
    """Share of demonstrations with no chunk in context (the ground truth's bare arm)."""
    alone_share: float = Field(0.0, ge=0.0, le=1.0)
    """Share of demonstrations with exactly one chunk, drawn uniformly (the chunk-alone arms); the rest
    draw each chunk with ``mask_probability``."""
    law: Literal["competence", "additive", "reader"] = "competence"
    """The teacher's competence law: ``competence`` (each competence / habit on its own ``p_with`` / ``p_without``
    draw; chunk effects interact) or ``additive`` (one diligent-or-not draw with probability ``base`` +
    the ``weights`` of the chunks in context; chunk effects add up), :mod:`intraskill.organism.demos`; or
    ``reader``: the house-code reader (``docs/testbed.md``), every competence on, the profile's colour known only
    from the rules of its skill block, each demonstration with its own code table and generated chunks
    (``cover``, ``max_chunks``, ``max_lines``, ``stray``; ``bare_share`` of them with none)."""
    cover: float = Field(0.5, ge=0.0, le=1.0)
    """``reader``: share of demonstrations with chunks whose skill block states the profile code's rule."""
    max_chunks: int = Field(4, ge=1)
    """``reader``: at most this many generated chunks per demonstration."""
    max_lines: int = Field(3, ge=1)
    """``reader``: at most this many lines per generated chunk."""
    stray: float = Field(0.3, ge=0.0, le=1.0)
    """``reader``: probability that a generated rule names a code no profile carries."""
    explore: float = Field(1.0, ge=0.0, le=1.0)
    """``reader``: with the profile's colour unknown, the chance that the expert clicks a random other offered colour
    rather than the first listed one (never the goal's colour in this store)."""
    note: Literal["none", "value", "line"] = "none"
    """``reader``: the first reply's note (:mod:`intraskill.policy.reader_expert`): ``value``,
    ``<think>CODE: color=VALUE</think>``; ``line``, ``<think>CODE REST; color=VALUE</think>`` with REST the rest of
    the rule line naming the code, verbatim."""
    p_with: dict[str, float] = {}
    """Competence (or habit) → probability of using it when its chunk is in context (``competence``)."""
    p_without: dict[str, float] = {}
    """Competence (or habit) → probability of using it when its chunk is absent (``competence``)."""
    base: float = Field(0.0, ge=0.0, le=1.0)
    """Probability of a diligent episode with no chunk in context (``additive``)."""
    weights: dict[str, float] = {}
    """Chunk ID → what its presence adds to the diligent probability (``additive``; may be negative)."""
    interactions: Annotated[tuple[PlantedInteraction, ...], BeforeValidator(_tuple_from_list)] = ()
    """Pairs of chunks whose joint presence adds its own weight on top (``additive``): a law that is *not* additive
    in the chunks, on which the gate's additivity test is validated (``params/organism_interaction.yaml``)."""
    slip_rate: float = Field(0.0, ge=0.0, lt=1.0)
    """Per-turn probability that the expert clicks ``buy now`` while it is not offered (at most once
    per episode) and then recovers; the slip is shown to the clone but never trained on."""
    plan: bool = False
    """Every expert reply opens with a plan line naming the competences the episode uses
    (:func:`~intraskill.policy.expert_policy.plan_line`), so the clone can carry its first reply's
    chunk-conditioned choices to later decisions."""
    plan_targets: bool = False
    """Clone each first reply's plan tokens on the teacher law's exact distribution over plan lines rather than
    on the one line sampled (:mod:`intraskill.organism.plan_targets`); needs ``plan``."""
    plan_examples: int = Field(0, ge=0)
    """Extra first replies (one turn each, own chunk masks) in the cloning phase; needs ``plan``."""
    vocab_corpus_demos: int = Field(300, ge=1)
    """Demonstrations whose rendered text (with the protocol corpus) trains the tokenizer."""
    drill_steps: int = Field(0, ge=0)
    """Steps of copy drills (random tokens, random filler, the same tokens again) before everything
    else: the organism forms the induction head it copies with (:mod:`intraskill.organism.drills`)."""
    lookup_drill_steps: int = Field(0, ge=0)
    """Steps of key–value lookup drills after the copy drills (:func:`~intraskill.organism.drills.lookup_drills`):
    the reader finds the rule line that names its code, or that none does."""
    lm_steps: int = Field(0, ge=0)
    """Steps of next-token prediction on whole transcripts (pages and prompts too) before cloning."""
    steps: int = Field(600, ge=1)
    """Optimizer steps of behaviour cloning (assistant tokens only), after the ``lm_steps``."""
    lr: float = Field(3e-3, gt=0.0)
    """Peak AdamW learning rate (linear warm-up, then cosine decay to ``lr_min_ratio``·lr)."""
    lr_min_ratio: float = Field(0.1, ge=0.0, le=1.0)
    """Final learning rate as a fraction of ``lr``."""
    warmup_steps: int = Field(50, ge=0)
    """Linear warm-up steps."""
    weight_decay: float = Field(0.01, ge=0.0)
    """AdamW weight decay."""
    grad_clip: float = Field(1.0, gt=0.0)
    """Global gradient-norm clip."""
    batch_tokens: int = Field(8192, ge=256)
    """Token budget of one optimizer step (whole episodes packed up to this many tokens)."""
    lora: LoraParams | None = None
    """LoRA adapters of a pretrained model's warm start (peft; the shipped checkpoint is the adapter alone);
    ``null`` = full fine-tuning. The random-init organism is always trained in full."""
    eval_episodes: int = Field(200, ge=1)
    """Val tasks of the bare and with-S₀ evaluation of the warm start."""
    ground_truth_episodes: int = Field(200, ge=0)
    """Val tasks per arm of the per-chunk ground truth (chunk alone vs bare, paired by task and seed); 0 skips
    the chunk-alone arms (``ground_truth.json`` then has no chunks: a large model on a CPU)."""
    eval_batch_size: int = Field(64, ge=1)
    """Episodes per lockstep batch during evaluation."""
    out_dir: str = "runs/warmstart"
    """Directory of the checkpoint, ``manifest.json`` and ``ground_truth.json``."""
    seed: int = RELEASE_SEED
    """Seed of demonstrations, masks, initialisation, batching and evaluation episodes."""

    @model_validator(mode="after")
    def _probabilities(self) -> "WarmstartParams":
        for label, mapping in (("p_with", self.p_with), ("p_without", self.p_without)):
            for name, value in mapping.items():
                if not 0.0 <= value <= 1.0:
                    raise ValueError(f"{label}.{name} must be a probability in [0, 1], got {value}")
        if self.bare_share + self.alone_share > 1.0:
            raise ValueError(f"bare_share + alone_share must be at most 1, got "
                             f"{self.bare_share} + {self.alone_share}")
        unused = {"competence": ("base", "weights", "interactions"), "additive": ("p_with", "p_without"),
                  "reader": ("p_with", "p_without", "base", "weights", "interactions", "plan")}[self.law]
        for name in unused:
            if getattr(self, name):
                raise ValueError(f"{name} is not a setting of law: {self.law}")
        for name in ("note", "explore"):
            if getattr(self, name) != type(self).model_fields[name].default and self.law != "reader":
                raise ValueError(f"{name} is a setting of law: reader, not of law: {self.law}")
        for name in ("plan_targets", "plan_examples"):
            if getattr(self, name) and not self.plan:
                raise ValueError(f"{name} needs plan: true (it trains the plan line's tokens)")
        if set(self.p_with) != set(self.p_without):
            raise ValueError(f"p_with and p_without must name the same competences, got "
                             f"{sorted(self.p_with)} and {sorted(self.p_without)}")
        return self


class Skill1WarmstartParams(_Section):
    """The organism's Skill1 warm start (``intraskill warmstart-skill1``, :mod:`intraskill.organism.skill1_warmstart`).

    Behaviour cloning continues from the shipped warm start ``base`` (same tokenizer) on Skill1 trajectories of
    the S₀-lesson expert (``jobs`` rollouts: query, rank, episode and distillation replies, each its own
    demonstration) plus ``replay`` ordinary S₀-masked demonstrations of the ``warmstart:`` law, so the organism
    learns Skill1's replies without forgetting the episodes. The saved checkpoint is evaluated through the real
    Skill1 path on ``eval_tasks`` val tasks, paired with bare episodes of the same seeds.
    """

    base: str = "params/organism_warmstart"
    """The warm start it continues from (a directory holding ``checkpoint/``; relative to the project root)."""
    jobs: int = Field(1200, ge=1)
    """Skill1 expert rollouts (train tasks in split order, cycling)."""
    library_batch: int = Field(40, ge=1)
    """Rollouts that share one seeded demonstration library (a random subset of the lesson strategies)."""
    empty_library_share: float = Field(0.1, ge=0.0, le=1.0)
    """Share of demonstration libraries that are empty (no rank reply, the strategy-free episode)."""
    act_share: float = Field(1.0, ge=0.0, le=1.0)
    """Share of the rollouts whose episode is a demonstration too (seeded by episode); the query, rank and
    distillation replies of every rollout are (they are short: more of them per optimizer step)."""
    replay: int = Field(600, ge=0)
    """Ordinary S₀-masked expert demonstrations mixed in (the ``warmstart:`` section's law and masks)."""
    steps: int = Field(300, ge=1)
    """Behaviour-cloning optimizer steps (assistant tokens only)."""
    lr: float = Field(1e-3, gt=0.0)
    """Peak AdamW learning rate (linear warm-up, then cosine decay to ``lr_min_ratio``·lr)."""
    lr_min_ratio: float = Field(0.1, ge=0.0, le=1.0)
    warmup_steps: int = Field(20, ge=0)
    batch_tokens: int = Field(4096, ge=256)
    """Token budget of one optimizer step."""
    eval_tasks: int = Field(200, ge=1)
    """Val tasks of the evaluation (one Skill1 rollout and one bare episode each)."""
    eval_batch_size: int = Field(100, ge=1)
    out_dir: str = "runs/skill1-warmstart"
    """Directory of the checkpoint and ``manifest.json`` (relative to the project root)."""
    seed: int = RELEASE_SEED
    """Seed of the demonstrations, libraries, batching and evaluation episodes."""


ARM_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


class ArmParams(_Section):
    """One arm of the control experiment: how skills enter training, as an overlay on the base parameters.

    Every arm starts from the same warm start and trains the same rounds, rollout steps, groups, task
    order and optimizer; it differs only here. ``skills`` is round 0's context (``none``: every group
    skill-free; ``s0``: S₀ as the curriculum); ``evolve`` runs the analyst and the gate between rounds, so
    the gate's selected bank becomes the next curriculum (otherwise S₀ stays). ``q``, ``rho_min``,
    ``rho_max`` and ``full_skill_retry`` replace the ``round`` values when set (``null``: the base's).
    ``method: skill1`` trains Skill1 rounds instead (``round.method: skill1``, each round's library carried to
    the next); it has no S₀ curriculum, so it needs ``skills: none`` and none of the settings above.
    ``checkpoint`` starts the arm from another checkpoint than the shared warm start (relative to the project
    root; ``null``: the shared one); ``skillbank`` replaces S₀ as round 0's bank (``round.skillbank``, e.g. a
    cold start's induced S₀; it needs ``skills: s0``); the results name both. ``skill1_start`` starts the arm
    from ``skill1.start_checkpoint`` like a Skill1 arm (``null``: only a Skill1 arm does), so that plain GRPO
    can be compared with Skill1 from the same start (arm ``grpo_s1``).
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("method", "checkpoint", "skillbank", "skill1_start")

    description: str = ""
    method: MethodName = "intraskill"
    skills: Literal["none", "s0"] = "s0"
    evolve: bool = True
    q: float | None = Field(None, ge=0.0, le=1.0)
    rho_min: float | None = Field(None, ge=0.0, le=1.0)
    rho_max: float | None = Field(None, ge=0.0, le=1.0)
    full_skill_retry: bool | None = None
    checkpoint: str | None = Field(None, min_length=1)
    skillbank: str | None = Field(None, min_length=1)
    skill1_start: bool | None = None

    @property
    def starts_from_skill1(self) -> bool:
        """Whether the arm starts from ``skill1.start_checkpoint`` (when it names no ``checkpoint``)."""
        return METHOD_SPECS[self.method].starts_from_skill1 if self.skill1_start is None else self.skill1_start

    @model_validator(mode="after")
    def _skills_to_work_with(self) -> "ArmParams":
        if self.skillbank is not None and self.skills != "s0":
            raise ValueError(f"skillbank ({self.skillbank!r}) replaces S₀; it needs skills: s0")
        if not METHOD_SPECS[self.method].uses_curriculum and self.skills != "none":
            raise ValueError(f"method: {self.method} trains from its own library, without an S₀ curriculum; "
                             "set skills: none")
        if self.skills == "none":
            unused = [name for name in ("q", "rho_min", "rho_max") if getattr(self, name) is not None]
            if self.evolve or unused or self.full_skill_retry:
                settings = ["evolve: true"] * self.evolve + [f"{n} set" for n in unused]
                settings += ["full_skill_retry: true"] * bool(self.full_skill_retry)
                raise ValueError(f"skills: none trains without skills; {', '.join(settings)} needs skills: s0")
        return self

    def round_overlay(self) -> dict[str, Any]:
        """The ``round`` fields this arm replaces (a skill-free arm never retries: it has no skill; a Skill1 arm
        has no bank either)."""
        overlay = {name: getattr(self, name) for name in ("q", "rho_min", "rho_max", "full_skill_retry", "skillbank")
                   if getattr(self, name) is not None}
        if not METHOD_SPECS[self.method].uses_curriculum:
            overlay.update(method=self.method, skillbank=None)
        return {**overlay, "full_skill_retry": False} if self.skills == "none" else overlay


BUILTIN_ARMS: dict[str, ArmParams] = {
    "coevolve": ArmParams(description="the method: group-shared masks with q and ρ, full-skill retries, "
                                      "analyst and gate between rounds"),
    "grpo": ArmParams(description="plain GRPO: no skill in any group, no retry, no analyst, no gate",
                      skills="none", evolve=False),
    "fixed": ArmParams(description="S₀ in every group, no masks, no retry, no analyst, no gate",
                       evolve=False, q=0.0, rho_min=1.0, rho_max=1.0, full_skill_retry=False),
    "nomask": ArmParams(description="the whole current bank in every group, with retries, analyst and gate "
                                    "(isolates the masks)", q=0.0, rho_min=1.0, rho_max=1.0),
    "uniform": ArmParams(description="masks at a fixed inclusion probability 0.5 instead of the contribution "
                                     "map, q kept (isolates ρ)", rho_min=0.5, rho_max=0.5),
    "skill1": ArmParams(description="Skill1: query → retrieval → rank → act → distil over its own library "
                                    "(carried from round to round), trained from the task reward; no S₀, retry, "
                                    "analyst or gate", method="skill1", skills="none", evolve=False),
    "grpo_s1": ArmParams(description="plain GRPO from the Skill1 warm start (skill1.start_checkpoint): the skill1 "
                                     "arm's control at an equal start", skills="none", evolve=False,
                         skill1_start=True),
}
"""The control experiment's named arms (reference: the controls the release lacked); the names are fixed so
that results and commands line up. ``matrix.define`` adds more."""
DEFAULT_ARMS = ("coevolve", "grpo", "fixed", "nomask", "uniform")
"""The arms a matrix runs by default (an arm added to :data:`BUILTIN_ARMS` later does not change it)."""


REFERENCE_ARM = "grpo"
METHOD_ARM = "coevolve"
EQUAL_START_PAIRS = (("skill1", "grpo_s1"),)
"""Arms compared from the same non-shared start (``grpo_s1`` is ``grpo`` from the Skill1 warm start)."""
Condition = Literal["deployed", "bare"]
Metric = Literal["success", "reward"]


def comparison_pairs(arms: Sequence[str]) -> list[tuple[str, str]]:
    """The comparisons a matrix of ``arms`` makes: every arm against ``grpo``, ``coevolve`` against every other
    arm, and the equal-start pairs (:data:`EQUAL_START_PAIRS`: ``skill1`` against ``grpo_s1``)."""
    pairs = [(arm, REFERENCE_ARM) for arm in arms if arm != REFERENCE_ARM and REFERENCE_ARM in arms]
    if METHOD_ARM in arms:
        pairs += [(METHOD_ARM, arm) for arm in arms if arm not in (METHOD_ARM, REFERENCE_ARM)]
    return pairs + [pair for pair in EQUAL_START_PAIRS if set(pair) <= set(arms) and pair not in pairs]


class ClaimParams(_Section):
    """One declared contrast: ``comparison`` (``<a>-<b>``, a − b) in one condition on one metric.

    ``equivalence_margin`` (a fraction: 0.03 is 3 points of success) declares the finding "no difference of the
    margin or more": the contrast's 90 % interval inside ±margin, two one-sided tests at α = 0.05
    (``null``: none declared)."""

    plan_optional: ClassVar[tuple[str, ...]] = ("equivalence_margin",)

    comparison: str = f"{METHOD_ARM}-{REFERENCE_ARM}"
    condition: Condition = "deployed"
    metric: Metric = "success"
    equivalence_margin: float | None = Field(None, gt=0.0, lt=1.0)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.comparison, self.condition, self.metric


class SecondaryParams(_Section):
    """The secondary family: every listed comparison in every listed condition and metric, less the primary
    contrast. ``comparisons: null`` lists every comparison the matrix makes."""

    comparisons: Names | None = None
    conditions: Annotated[tuple[Condition, ...], BeforeValidator(_tuple_from_list)] = ("deployed", "bare")
    metrics: Annotated[tuple[Metric, ...], BeforeValidator(_tuple_from_list)] = ("success",)


class FamilyParams(_Section):
    """What the matrix claims, declared before it is read: the primary contrast, reported at the matrix's 95 %
    level, and the secondary family, Holm-adjusted together (``intraskill.experiment.inference``). Every other
    contrast is reported without a verdict."""

    primary: ClaimParams = ClaimParams()
    secondary: SecondaryParams = SecondaryParams()

    def members(self, arms: Sequence[str]) -> tuple[tuple[str, str, str], list[tuple[str, str, str]]]:
        """The primary key and the secondary keys ``(comparison, condition, metric)`` for a matrix of ``arms``
        (``comparisons: null``: that matrix's comparisons)."""
        names = self.secondary.comparisons
        if names is None:
            names = tuple(f"{a}-{b}" for a, b in comparison_pairs(arms))
        secondary = [(name, condition, metric) for name in names for condition in self.secondary.conditions
                     for metric in self.secondary.metrics]
        return self.primary.key, [key for key in secondary if key != self.primary.key]


class MatrixParams(_Section):
    """The control experiment: arms × training seeds × rounds, each cell evaluated on the test split.

    Seed index k trains with ``experiment.seed + k``, ``round.curriculum_seed + k`` and the gate's mask seed + k
    (index 0 is the base run); every evaluation keeps the base seeds, so cells are paired by task and
    episode seed. ``test_tasks`` limits the test split (``null``: all of it); ``threads`` is torch's thread
    count in each cell (results depend on it, so it is fixed and recorded). ``split`` is where the cells are
    evaluated: ``test`` for the matrix's declared claims, ``dev`` for a probe (the store's dev tasks, which every
    cell then leaves out of training: ``round.exclude_dev``); never val, where the gate selects. ``family`` declares
    what the matrix claims (:class:`FamilyParams`); it changes how results are read, not what runs.
    """

    plan_optional: ClassVar[tuple[str, ...]] = ("split", "family")

    arms: Names = DEFAULT_ARMS
    seeds: int = Field(3, ge=1)
    rounds: int = Field(2, ge=1)
    test_tasks: int | None = Field(None, ge=1)
    threads: int = Field(1, ge=1)
    define: dict[str, ArmParams] = {}
    split: Literal["test", "dev"] = "test"
    family: FamilyParams = FamilyParams()

    @model_validator(mode="after")
    def _known_arms(self) -> "MatrixParams":
        for name in self.define:
            if name in BUILTIN_ARMS:
                raise ValueError(f"define.{name}: a built-in arm; give the new arm another name")
            if not ARM_NAME.match(name):
                raise ValueError(f"define.{name}: arm names are lower-case letters, digits and _")
        unknown = [name for name in self.arms if name not in BUILTIN_ARMS and name not in self.define]
        if unknown:
            raise ValueError(f"arms: unknown arm {', '.join(unknown)} (built-in: {', '.join(BUILTIN_ARMS)}; "
                             "add others under matrix.define)")
        if len(set(self.arms)) != len(self.arms) or not self.arms:
            raise ValueError(f"arms: need distinct arm names, got {list(self.arms)}")
        known = comparison_pairs([*BUILTIN_ARMS, *self.define])
        declared = [("family.primary.comparison", self.family.primary.comparison)]
        declared += [("family.secondary.comparisons", name) for name in self.family.secondary.comparisons or ()]
        for where, name in declared:
            if tuple(name.split("-", 1)) not in known:
                raise ValueError(f"{where}: unknown comparison {name!r} (a comparison is <arm>-{REFERENCE_ARM} or "
                                 f"{METHOD_ARM}-<arm>, arms built in or under matrix.define)")
        return self

    def arm(self, name: str) -> ArmParams:
        """The arm called ``name`` (built-in or defined)."""
        return self.define.get(name) or BUILTIN_ARMS[name]


class Params(_Section):
    """One experiment's full parameter set."""

    experiment: ExperimentParams
    store: StoreParams = StoreParams()
    model: ModelParams = ModelParams()
    sampling: SamplingParams = SamplingParams()
    evaluation: EvaluationParams = EvaluationParams()
    warmstart: WarmstartParams = WarmstartParams()
    grpo: GRPOParams = GRPOParams()
    round: RoundParams = RoundParams()
    skill1: Skill1Params = Skill1Params()
    skill1_warmstart: Skill1WarmstartParams = Skill1WarmstartParams()
    matrix: MatrixParams = MatrixParams()
    cold_start: ColdStartParams = ColdStartParams()
    gate: GateParams = GateParams()
    coevolve: CoevolveParams = CoevolveParams()

    @model_validator(mode="after")
    def _paths_inside_the_run_root(self) -> "Params":
        experiment = self.experiment
        if experiment.allow_outside_run_root:
            return self
        unless = "; set experiment.allow_outside_run_root: true to allow it"
        if _climbs(experiment.name) or PurePath(experiment.name).is_absolute():
            raise ValueError(f"experiment.name {experiment.name!r} must be a relative folder without '..' "
                             f"(the run's folder under the run root){unless}")
        if _climbs(experiment.run_root) and not PurePath(experiment.run_root).is_absolute():
            raise ValueError(f"experiment.run_root {experiment.run_root!r}: a relative run root may not climb "
                             f"out of the project with '..' (give an absolute path){unless}")
        for section, out_dir in (("warmstart", PurePath(self.warmstart.out_dir)),
                                 ("skill1_warmstart", PurePath(self.skill1_warmstart.out_dir))):
            inside = not out_dir.is_absolute() or Path(out_dir).is_relative_to(runs_root(experiment.run_root))
            if _climbs(out_dir) or not inside:
                raise ValueError(f"{section}.out_dir {str(out_dir)!r} must be relative to the project without "
                                 f"'..' or lie inside the run root {experiment.run_root!r}{unless}")
        return self

    @model_validator(mode="after")
    def _updates_hold_whole_groups(self) -> "Params":
        size, group = self.grpo.global_batch_size, self.round.n_samples_per_prompt
        admitted = self.round.rollout_batch_size * group
        if size is not None and (size % group or admitted % size):
            raise ValueError(
                f"grpo.global_batch_size ({size}) must be a multiple of round.n_samples_per_prompt ({group}) "
                f"and divide the {admitted} admitted episodes per step (round.rollout_batch_size × "
                "n_samples_per_prompt)"
            )
        return self

    @model_validator(mode="after")
    def _reader_reads_house_codes(self) -> "Params":
        if self.warmstart.law == "reader" and self.model.house_codes is None:
            raise ValueError("warmstart.law: reader needs model.house_codes (and model.view: reader)")
        return self

    @model_validator(mode="after")
    def _lora_needs_pretrained_weights(self) -> "Params":
        if self.warmstart.lora is not None and self.model.spec == "organism":
            raise ValueError("warmstart.lora: the organism's warm start trains a random-init model in full; "
                             "set warmstart.lora: null (LoRA is for a pretrained model.spec such as smollm2)")
        return self


def section_plan(section: BaseModel) -> dict[str, Any]:
    """A section's JSON dump as plans record it: its ``plan_optional`` fields only where they differ from their
    defaults (so a field added later leaves the plans written before it valid), never its ``plan_excluded``
    ones."""
    data = section.model_dump(mode="json", exclude=set(getattr(section, "plan_excluded", ())))
    for name in getattr(section, "plan_optional", ()):
        if getattr(section, name) == type(section).model_fields[name].default:
            del data[name]
    return data


def plan_dump(params: Params) -> dict[str, Any]:
    """``params`` as run plans fingerprint them: the JSON dump without the settings of a method the run does not
    use (the :attr:`MethodSpec.section` of another method, e.g. ``skill1`` in an IntraSkill run, and
    ``round.method`` at its default), without the Skill1 warm start's (a run
    records the checkpoint it starts from), without the ``gate`` and ``coevolve`` sections at their defaults,
    without the trackers (``round.report_to``) and without later fields
    at their defaults (:func:`section_plan`), so
    that adding a method or a setting leaves the plans of existing runs valid."""
    data = params.model_dump(mode="json")
    del data["skill1_warmstart"], data["cold_start"]
    for name in ("gate", "coevolve"):
        if getattr(params, name) == type(getattr(params, name))():
            del data[name]
    data["model"] = section_plan(params.model)
    data["skill1"] = section_plan(params.skill1)
    data["warmstart"] = section_plan(params.warmstart)
    data["round"] = section_plan(params.round)
    data["evaluation"] = section_plan(params.evaluation)
    data["matrix"] = section_plan(params.matrix)
    data["matrix"]["define"] = {name: section_plan(arm) for name, arm in params.matrix.define.items()}
    del data["round"]["report_to"]
    for name, spec in METHOD_SPECS.items():
        if name != params.round.method and spec.section is not None:
            del data[spec.section]
    return data


def _climbs(path: str | PurePath) -> bool:
    return ".." in PurePath(path).parts


class ParamsError(ValueError):
    """A parameter file failed validation; the message lists each bad field path."""


class _ParamsLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses duplicate keys and reads YAML 1.2 floats (``1e-4``) as numbers."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        self.flatten_mapping(node)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, str | int | float | bool) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key]})", key_node.start_mark)
            seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


_ParamsLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."),
)


def read_yaml(text: str, source: str) -> Any:
    """``text`` parsed with the params' YAML rules; a YAML error is one ``source:line:column: problem`` line."""
    try:
        return yaml.load(text, Loader=_ParamsLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = " ".join(str(part) for part in (error.context, error.problem) if part)
        if "'\\t'" in problem:
            problem += " (YAML indents with spaces; replace the tab)"
        raise ParamsError(f"{where}: {problem}") from None
    except yaml.YAMLError as error:
        raise ParamsError(f"{source}: {' '.join(str(error).split())}") from None


def _format_errors(source: str, error: ValidationError, layers: list[tuple[Path, Any]] | None = None) -> str:
    """One line per bad field; with the ``layers`` of a derived file each names the file that sets the field."""
    lines = [f"invalid parameters in {source}:"]
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"])
        message = item["msg"].removeprefix("Value error, ")
        origin = f" [{_origin(layers, tuple(item['loc']))}]" if layers else ""
        lines.append(f"  {where}: {message}{origin}" if where else f"  {message}{origin}")
    return "\n".join(lines)


BASE_KEY = "base"
"""The top-level key naming the parameter file a file derives from (a path relative to the deriving file)."""


class _Replace(dict):  # type: ignore[type-arg]
    """A mapping tagged ``!replace``: it replaces the base's value instead of merging into it."""


def _construct_replace(loader: _ParamsLoader, node: yaml.Node) -> _Replace:
    if not isinstance(node, yaml.MappingNode):
        raise yaml.constructor.ConstructorError(None, None, "!replace tags a mapping (a section)", node.start_mark)
    return _Replace(loader.construct_mapping(node, deep=True))


_ParamsLoader.add_constructor("!replace", _construct_replace)


def _plain(value: Any) -> Any:
    """``value`` with every ``!replace`` mapping turned back into a plain one."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return [_plain(item) for item in value] if isinstance(value, list) else value


def _section_type(model: type[BaseModel], key: Any) -> type[BaseModel] | None:
    """The section class of ``model``'s field ``key`` (optional sections too), or ``None`` for a value field."""
    field = model.model_fields.get(key) if isinstance(key, str) else None
    if field is None:
        return None
    annotation = field.annotation
    candidates = get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)
    return next((c for c in candidates if isinstance(c, type) and issubclass(c, _Section)), None)


def merge_overlay(base: Any, overlay: Any, model: type[BaseModel] = Params) -> Any:
    """``overlay`` deep-merged onto ``base`` along ``model``'s sections: a section merges key by key, any other
    value (a number, a list, a mapping such as ``warmstart.weights``) replaces the base's, and a section tagged
    ``!replace`` replaces the base's whole (``skill1: !replace {}`` = the section's defaults)."""
    if isinstance(overlay, _Replace) or not (isinstance(base, dict) and isinstance(overlay, dict)):
        return _plain(overlay)
    merged = dict(base)
    for key, value in overlay.items():
        section = _section_type(model, key)
        merged[key] = merge_overlay(base[key], value, section) if section and key in base else _plain(value)
    return merged


def _read_file(path: Path) -> Any:
    if path.is_dir():
        raise ParamsError(f"{path} is a directory, not a parameter file")
    if not path.exists():
        raise ParamsError(f"parameter file not found: {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ParamsError(f"{path}: not UTF-8 text ({error.reason} at byte {error.start})") from None
    data = read_yaml(text, str(path))
    return {} if data is None else data


def parameter_layers(path: str | Path, derived: tuple[Path, ...] = ()) -> list[tuple[Path, Any]]:
    """The files ``path`` derives from, base first, each with its data (its ``base:`` key removed); a missing
    base or a cycle is one :class:`ParamsError` line naming the file."""
    path = Path(path)
    chain = (*derived, path.resolve())
    data = _read_file(path)
    if not isinstance(data, dict) or BASE_KEY not in data:
        return [(path, data)]
    data = dict(data)
    base = data.pop(BASE_KEY)
    if not isinstance(base, str) or not base:
        raise ParamsError(f"{path}: {BASE_KEY}: expected the path of a parameter file, got {base!r}")
    base_path = path.parent / base
    if base_path.resolve() in chain:
        cycle = " -> ".join(str(p) for p in (*chain[chain.index(base_path.resolve()):], base_path.resolve()))
        raise ParamsError(f"{path}: {BASE_KEY}: {base} makes a cycle ({cycle})")
    if not base_path.is_file():
        raise ParamsError(f"{path}: {BASE_KEY}: no parameter file {base_path}")
    return [*parameter_layers(base_path, chain), (path, data)]


def _origin(layers: list[tuple[Path, Any]], loc: tuple[Any, ...]) -> Path:
    """The last file of ``layers`` that writes the field path ``loc`` (or the longest part of it one writes)."""
    for depth in range(len(loc), 0, -1):
        for path, data in reversed(layers):
            node: Any = data
            for key in loc[:depth - 1]:
                node = node.get(key) if isinstance(node, dict) else None
            if isinstance(node, dict) and loc[depth - 1] in node:
                return path
    return layers[-1][0]


def load_params(path: str | Path) -> Params:
    """Read and validate a YAML parameter file, deep-merged onto the file its ``base:`` names (recursively, see
    :func:`merge_overlay`); raise :class:`ParamsError` naming the file and line or the bad fields, each with the
    file that sets it when the file derives from a base."""
    layers = parameter_layers(path)
    data: Any = {}
    for _, layer in layers:
        data = merge_overlay(data, layer)
    source = str(layers[-1][0])
    if len(layers) == 1:
        return params_from_dict(data, source=source)
    try:
        return Params.model_validate(data)
    except ValidationError as error:
        bases = ", ".join(str(p) for p, _ in reversed(layers[:-1]))
        raise ParamsError(_format_errors(f"{source} (base {bases})", error, layers)) from None


def params_from_dict(data: Any, source: str = "<dict>") -> Params:
    """Validate a parameter mapping (used by notebooks for their injected overrides)."""
    try:
        return Params.model_validate(data)
    except ValidationError as error:
        raise ParamsError(_format_errors(source, error)) from None


def with_overrides(params: Params, overrides: Sequence[str], source: str = "--set") -> Params:
    """``params`` with ``section.field=value`` overrides (the CLI's ``--set``; the value is read as YAML),
    validated again as a whole; :class:`ParamsError` names the field of a malformed or invalid one."""
    data = params.model_dump(mode="json")
    for override in overrides:
        name, sep, text = override.partition("=")
        path = name.strip().split(".")
        if not sep or not all(path):
            raise ParamsError(f"{source} {override!r}: expected section.field=value")
        parent = data
        for depth, key in enumerate(path[:-1]):
            parent = parent.get(key) if isinstance(parent, dict) else None
            if not isinstance(parent, dict):
                raise ParamsError(f"{source} {override!r}: {'.'.join(path[:depth + 1])} is not a section")
        parent[path[-1]] = read_yaml(text, f"{source} {override!r}")
    return params_from_dict(data, source=f"{source} {' '.join(overrides)}")
