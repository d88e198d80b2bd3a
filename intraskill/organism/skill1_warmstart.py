"""The organism's Skill1 warm start: behaviour cloning continued from the shipped warm start on Skill1 trajectories.

Planted usefulness rides on S₀ chunk titles (:mod:`intraskill.policy.skill1_expert`): each chunk becomes a
lesson (action = its title, navigation = its procedure line, description = its "Applies when" line), the
expert puts the most useful candidate on top (helpful, then neutral, then harmful; the others in retrieval
order), distils a lesson drawn per session, and plays a selected
strategy that names chunk C's title as chunk C under the S₀ law. In the organism's ``compact`` view an
injected strategy is one line, so the organism reads the whole ``Action Insight: <title> | …`` it conditions on.

Pipeline (:func:`run_skill1_warmstart`, ``intraskill warmstart-skill1 --params P``):

1. ``skill1_warmstart.jobs`` Skill1 rollouts of the lesson expert on train tasks through
   :func:`~intraskill.agent.skill1_episode.run_skill1_episodes` with the real encoder, over seeded
   demonstration libraries (a random subset of the lesson strategies per ``library_batch`` rollouts, a share
   of them empty), recorded by :class:`~intraskill.organism.demos.RecordingPolicy`: the query, rank, episode
   and distillation replies are separate sessions, hence separate demonstrations (the episode of an
   ``act_share`` of the rollouts); plus ``replay`` ordinary
   S₀-masked demonstrations (the ``warmstart:`` law), so the organism keeps its episodes;
2. behaviour cloning from ``base``'s checkpoint (its tokenizer, float32), assistant tokens only, resumable;
   the checkpoint is saved in bfloat16;
3. the *saved* checkpoint is evaluated through the real Skill1 path on val, with every lesson strategy in the
   library: protocol errors per reply type, success with the selected strategy vs bare (same tasks and
   episode seeds, paired bootstrap), and the ranking against planted usefulness (NDCG, helpful first);
4. ``manifest.json``: parameters, lessons, seeds, data and weight digests, losses, timings, metrics.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from intraskill.agent.env import Environment, InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, EpisodeResult, RuntimeConfig, run_episodes
from intraskill.agent.skill1_episode import Skill1Episode, protocol_error_counts, run_skill1_episodes
from intraskill.agent.skill1_replies import DistillReply, RankReply
from intraskill.evaluate.bootstrap import paired_bootstrap_ci
from intraskill.hashing import seed32, sha256_file, unit_draw
from intraskill.layout import WarmstartDir
from intraskill.organism.cloning import CHECKPOINT_DTYPE, BCExample, BCResult, behaviour_clone
from intraskill.organism.demos import (
    Demonstration,
    RecordingPolicy,
    S0Error,
    chunk_roles,
    teacher_law,
    tokenize_demonstration,
    write_demonstrations,
)
from intraskill.organism.manifest import (
    BaseWarmstart,
    DistillMetrics,
    PairedSuccess,
    RankingMetrics,
    RoleSuccess,
    Skill1Cloning,
    Skill1WarmstartManifest,
    Skill1WarmstartMetrics,
)
from intraskill.organism.truth import arm_metrics
from intraskill.organism.warmstart import expert_demos, save_checkpoint
from intraskill.params import Params, Skill1Params, section_plan
from intraskill.paths import resolve_project_path
from intraskill.policy.expert_policy import CompetenceLaw, ExpertPolicy
from intraskill.policy.factory import load_model, load_policy, resolve_device, weights_digest
from intraskill.policy.skill1_expert import USEFULNESS, Lesson, Skill1Lessons
from intraskill.shop.build import open_engine
from intraskill.shop.scripted_expert import Competences
from intraskill.skills.bank import SkillBank, load_skillbank
from intraskill.skills.library import SkillLibrary
from intraskill.skills.retrieval import Encoder, SentenceEncoder, encoder_identity
from intraskill.training.skill1_rewards import ndcg

REPLY_SESSIONS = {"query": "/query", "rank": "/rank", "act": "", "distill": "/distill"}
"""Reply type → the policy session suffix :func:`run_skill1_episodes` gives it."""
EVAL_ONLY = ("eval_tasks", "eval_batch_size", "out_dir")
"""Skill1 warm-start settings that do not change the trained model."""
ROUND_ONLY = ("lambda_rerank", "lambda_distill", "ndcg_cutoff", "rerank_baseline", "objective", "util_reward",
              "oversample", "seed_library", "start_checkpoint")
"""``skill1:`` settings the warm start never reads (the RL objective, a round's library and an arm's start)."""


def warmstart_skill1_settings(params: Skill1Params) -> dict[str, Any]:
    """The ``skill1:`` settings a Skill1 warm start is made with (its plan less :data:`ROUND_ONLY`)."""
    return {key: value for key, value in section_plan(params).items() if key not in ROUND_ONLY}
_PROCEDURE = re.compile(r"^\s*1\.\s+(.+)$", re.MULTILINE)
_APPLIES = re.compile(r"^- Applies when:\s*(.+)$", re.MULTILINE)


def s0_lessons(bank: SkillBank) -> Skill1Lessons:
    """Every enabled S₀ chunk as a :class:`Lesson` (title, first procedure step, "Applies when"; usefulness by
    role); :class:`~intraskill.organism.demos.S0Error` names a chunk without those lines."""
    roles = {role.skill_id: role.role for role in chunk_roles(bank)}
    lessons = []
    for skill in bank.enabled_skills():
        title = skill.content.strip().split("\n", 1)[0].lstrip("#").strip()
        procedure, applies = _PROCEDURE.search(skill.content), _APPLIES.search(skill.content)
        if not title or procedure is None or applies is None:
            raise S0Error(f"skills[{skill.skill_id!r}].content: a lesson needs a title, '- Applies when:' and "
                          "a first procedure step '1. …'")
        lessons.append(Lesson(skill.skill_id, title, procedure.group(1).strip(), applies.group(1).strip(),
                              USEFULNESS[roles[skill.skill_id]]))
    return Skill1Lessons(tuple(lessons))


def lesson_library(lessons: Sequence[Lesson], params: Skill1Params) -> SkillLibrary:
    """A library seeded with ``lessons`` as skills (desc = description head, strat = the lesson's strategy)."""
    library = SkillLibrary(params.capacity, params.ema_rate, params.initial_utility)
    for lesson in lessons:
        library.seed(lesson.description, lesson.strat)
    return library


def demo_libraries(lessons: Skill1Lessons, count: int, seed: int, empty_share: float) -> list[tuple[Lesson, ...]]:
    """``count`` seeded demonstration libraries: empty with ``empty_share``, else a uniform-size random subset."""
    rng = random.Random(seed32(f"{seed}:skill1-libraries"))
    pool = list(lessons.lessons)
    return [() if rng.random() < empty_share else tuple(rng.sample(pool, rng.randint(1, len(pool))))
            for _ in range(count)]


def skill1_demonstrations(params: Params, engine: Any, task_ids: Sequence[int], lessons: Skill1Lessons,
                          law: CompetenceLaw, encoder: Encoder) -> tuple[list[Demonstration], dict[str, Any]]:
    """The lesson expert's Skill1 rollouts as demonstrations (one per reply session; unscored episodes dropped)
    and a summary (demonstrations per reply type, the expert's success by selected role)."""
    sw = params.skill1_warmstart
    config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    policy = RecordingPolicy(ExpertPolicy(Competences(), seed=sw.seed, language=params.store.language, law=law,
                                          max_actions=params.store.max_actions,
                                          slip_rate=params.warmstart.slip_rate, lessons=lessons))
    batches = -(-sw.jobs // sw.library_batch)
    demos: list[Demonstration] = []
    kinds: Counter[str] = Counter()
    outcomes: dict[str, list[float]] = {}
    for batch, chosen in enumerate(demo_libraries(lessons, batches, sw.seed, sw.empty_library_share)):
        indices = range(batch * sw.library_batch, min(sw.jobs, (batch + 1) * sw.library_batch))
        jobs = [EpisodeJob(f"skill1-demo-{i:05d}", task_ids[i % len(task_ids)], i // len(task_ids),
                           seed=seed32(f"{sw.seed}:skill1-demo:{i}")) for i in indices]
        library = lesson_library(chosen, params.skill1)
        for episode in run_skill1_episodes(policy, lambda: InProcessEnvironment(engine), jobs, library, encoder,
                                           config, params.skill1):
            selected = episode.selected
            skill_ids = [] if selected is None else [f"skill1-{selected.skill_id}"]
            for kind, suffix in REPLY_SESSIONS.items():
                segments = policy.finished.pop(episode.job.episode_id + suffix, None)
                skipped = kind == "act" and (not episode.result.scored or
                                             unit_draw(f"{sw.seed}:act:{episode.job.episode_id}") >= sw.act_share)
                if not segments or skipped:
                    continue
                reward = episode.result.reward if kind == "act" else None
                demos.append(Demonstration(episode.job.episode_id + suffix, episode.job.task_id, skill_ids,
                                           segments, reward))
                kinds[kind] += 1
            if episode.success is not None:
                outcomes.setdefault(_role(lessons, episode), []).append(float(episode.success))
    summary = {"per_reply_type": dict(kinds),
               "expert_success": {role: {"episodes": len(v), "success": sum(v) / len(v)}
                                  for role, v in sorted(outcomes.items())}}
    return demos, summary


def _role(lessons: Skill1Lessons, episode: Skill1Episode) -> str:
    """``bare`` without a selected skill, else the planted role of the selected strategy."""
    if episode.selected is None:
        return "bare"
    usefulness = lessons.usefulness(episode.selected.strat)
    return next(role for role, value in USEFULNESS.items() if value == usefulness)


def bc_identity(params: Params) -> dict[str, Any]:
    """What the cloned model is made from: the base weights, store, shape, view, laws and training settings."""
    sw = params.skill1_warmstart
    return {"base_sha256": weights_digest(_base_checkpoint(params)), "store": params.store.model_dump(mode="json"),
            "organism": params.model.organism.model_dump(mode="json"), "view": params.model.view,
            "sampling": params.sampling.model_dump(mode="json"),
            "warmstart": params.warmstart.model_dump(mode="json", exclude={"out_dir", "eval_episodes",
                                                                            "ground_truth_episodes",
                                                                            "eval_batch_size"}),
            "skill1": warmstart_skill1_settings(params.skill1),
            "skill1_warmstart": sw.model_dump(mode="json", exclude=set(EVAL_ONLY))}


def _base_checkpoint(params: Params) -> Path:
    return WarmstartDir(resolve_project_path(params.skill1_warmstart.base)).checkpoint.root


def continue_cloning(params: Params, demos: Sequence[Demonstration], out: Path,
                     progress: bool = True) -> tuple[Path, BCResult, list[BCExample]]:
    """Behaviour cloning of ``base``'s checkpoint on ``demos`` (float32 on ``model.device``); saves
    ``out/checkpoint`` and returns it with the cloning's result and the examples it trained on (those that fit
    the context)."""
    # deferred: torch is heavy to import
    import torch

    sw, ws = params.skill1_warmstart, params.warmstart
    model, tokenizer, _, _ = load_model("organism", checkpoint=str(_base_checkpoint(params)))
    model = model.to(resolve_device(params.model.device), torch.float32)
    limit = params.model.organism.max_position
    examples = [e for e in (BCExample(*tokenize_demonstration(d.segments, tokenizer)) for d in demos)
                if len(e.input_ids) <= limit]
    torch.manual_seed(seed32(f"{sw.seed}:bc"))
    identity = bc_identity(params)
    result = behaviour_clone(model, examples, steps=sw.steps, lr=sw.lr, warmup_steps=sw.warmup_steps,
                             lr_min_ratio=sw.lr_min_ratio, weight_decay=ws.weight_decay, grad_clip=ws.grad_clip,
                             batch_tokens=sw.batch_tokens, pad_id=int(tokenizer.pad_token_id), seed=sw.seed,
                             state_path=WarmstartDir(out).bc_state, state_key=json.dumps(identity, sort_keys=True),
                             progress=progress)
    checkpoint = save_checkpoint(model, tokenizer, out)
    WarmstartDir(out).bc_state.unlink(missing_ok=True)
    return checkpoint, result, examples


def _gains(lessons: Skill1Lessons, episode: Skill1Episode) -> list[float]:
    """Graded planted gains of the candidates: harmful 0, neutral 1, helpful 2."""
    return [lessons.usefulness(c.skill.strat) + 1.0 for c in episode.candidates]


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def ranking_metrics(episodes: Sequence[Skill1Episode], lessons: Skill1Lessons) -> RankingMetrics:
    """The well-formed rank replies against planted usefulness: mean NDCG (and of the retrieval order), the
    share with a helpful strategy on top (where one was retrieved), with the harmful one on top / last (where it
    was retrieved) and equal to the expert's ranking."""
    ranked = [e for e in episodes if isinstance(e.rank, RankReply) and len(e.candidates) > 1]
    gains = [_gains(lessons, e) for e in ranked]
    tops = [g[e.rank.order[0]] for e, g in zip(ranked, gains)]
    harmful = [(e, g) for e, g in zip(ranked, gains) if 0.0 in g]
    return RankingMetrics(
        ranked=len(ranked),
        ndcg=_share([ndcg(e.rank.order, g) for e, g in zip(ranked, gains)]),
        ndcg_retrieval_order=_share([ndcg(range(len(g)), g) for g in gains]),
        top_helpful=_share([top == 2.0 for top, g in zip(tops, gains) if 2.0 in g]),
        top_helpful_retrieval_order=_share([g[0] == 2.0 for g in gains if 2.0 in g]),
        harmful_top=_share([g[e.rank.order[0]] == 0.0 for e, g in harmful]),
        harmful_last=_share([g[e.rank.order[-1]] == 0.0 for e, g in harmful]),
        expert_order=_share([e.rank.order == lessons.rank([c.skill.strat for c in e.candidates]) for e in ranked]),
    )


def skill1_eval_metrics(episodes: Sequence[Skill1Episode], bare: Sequence[EpisodeResult], lessons: Skill1Lessons,
                        *, samples: int, seed_base: int) -> Skill1WarmstartMetrics:
    """Protocol errors per reply type, success with the selected strategy vs bare (paired by task and seed,
    overall and by the selected strategy's planted role), the ranking and the distilled lessons."""
    errors = protocol_error_counts(episodes)
    replies = {"query": len(episodes), "rank": sum(e.rank is not None for e in episodes),
               "act": sum(e.result.model_steps for e in episodes),
               "distill": sum(e.distill is not None for e in episodes)}
    def success(result: EpisodeResult) -> float:
        return float(result.scored and result.reward.r_success == 1.0)

    with_skill = [success(e.result) for e in episodes]
    without = [success(r) for r in bare]
    paired = paired_bootstrap_ci(without, with_skill, "r_success", samples=samples, seed_base=seed_base)
    by_role: dict[str, RoleSuccess] = {}
    for role in ("helpful", "neutral", "harmful", "bare"):
        pairs = [(b, s) for e, b, s in zip(episodes, without, with_skill) if _role(lessons, e) == role]
        if pairs:
            by_role[role] = RoleSuccess(episodes=len(pairs), bare_success=sum(b for b, _ in pairs) / len(pairs),
                                        skill1_success=sum(s for _, s in pairs) / len(pairs))
    distilled = [e for e in episodes if isinstance(e.distill, DistillReply)]
    return Skill1WarmstartMetrics(
        split="val",
        episodes=len(episodes),
        protocol_error_rate={kind: errors[kind] / max(1, count) for kind, count in replies.items()},
        protocol_errors=errors,
        replies=replies,
        failures=dict(sorted(Counter(f"{f.kind}:{f.code}" for e in episodes for f in e.failures()).items())),
        success=PairedSuccess(bare=paired.a_mean, skill1=paired.b_mean, difference=paired.mean_difference,
                              ci95=paired.ci95, pairs=paired.pairs),
        by_selected_role=by_role,
        ranking=ranking_metrics(episodes, lessons),
        distill=DistillMetrics(
            well_formed=len(distilled),
            names_a_chunk=_share([lessons.lesson_of(e.distill.strat) is not None for e in distilled]),
            outcome_matches=_share([e.distill.task_success == bool(e.success) for e in distilled])),
        skill1_episodes=arm_metrics([e.result for e in episodes]),
        bare_episodes=arm_metrics(bare),
    )


def evaluate_skill1_warmstart(params: Params, checkpoint: Path, env_factory: Callable[[], Environment],
                              val_ids: Sequence[int], lessons: Skill1Lessons, encoder: Encoder,
                              progress: bool = True) -> Skill1WarmstartMetrics:
    """The saved ``checkpoint`` through the real Skill1 path on the first ``eval_tasks`` val tasks (the library
    holds every lesson strategy), and bare on the same tasks and episode seeds: :func:`skill1_eval_metrics`."""
    sw = params.skill1_warmstart
    policy = load_policy("organism", checkpoint=str(checkpoint), device=resolve_device(params.model.device),
                         dtype=params.model.dtype, max_batch=sw.eval_batch_size)
    config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    library = lesson_library(lessons.lessons, params.skill1)
    jobs = [EpisodeJob.create(task, 0, seed32(f"{sw.seed}:skill1-eval")) for task in val_ids[:sw.eval_tasks]]
    episodes: list[Skill1Episode] = []
    bare: list[EpisodeResult] = []
    for start in range(0, len(jobs), sw.eval_batch_size):
        batch = jobs[start:start + sw.eval_batch_size]
        episodes += run_skill1_episodes(policy, env_factory, batch, library, encoder, config, params.skill1,
                                        progress=progress)
        bare += run_episodes(policy, env_factory, batch, config, progress=progress)
    return skill1_eval_metrics(episodes, bare, lessons, samples=params.evaluation.bootstrap_samples,
                               seed_base=params.evaluation.bootstrap_seed)


def finished_bc(out: Path, params: Params) -> Skill1Cloning | None:
    """The ``bc.json`` record of a finished cloning stage in ``out`` with these settings, else ``None``."""
    path = WarmstartDir(out).bc
    if not path.is_file() or not WarmstartDir(out).checkpoint.is_saved():
        return None
    return Skill1Cloning.finished(path, bc_identity(params))


def clone_skill1(params: Params, store: Any, bank: SkillBank, law: CompetenceLaw, lessons: Skill1Lessons,
                 encoder: Encoder, out: Path, progress: bool = True) -> Skill1Cloning:
    """The cloning stage: the lesson expert's Skill1 demonstrations (with ``replay`` ordinary ones) cloned into
    ``out/checkpoint``; writes and returns its ``bc.json`` record."""
    sw = params.skill1_warmstart
    started = time.monotonic()
    demos, summary = skill1_demonstrations(params, store.engine, store.task_ids, lessons, law, encoder)
    replay = expert_demos(params, store, bank, law, count=sw.replay, seed=seed32(f"{sw.seed}:replay"),
                          max_turns=params.sampling.max_turns, slip_rate=params.warmstart.slip_rate,
                          progress=progress) if sw.replay else []
    write_demonstrations([*demos, *replay], WarmstartDir(out).skill1_demos)
    demos_s = round(time.monotonic() - started, 1)
    _, result, examples = continue_cloning(params, [*demos, *replay], out, progress=progress)
    record = Skill1Cloning(
        identity=bc_identity(params), demos_s=demos_s, steps=result.steps, resumed_at=result.resumed_at,
        tokens=result.tokens, losses=result.losses, wall_s=round(result.wall_s, 1), examples=len(examples),
        dropped_too_long=len(demos) + len(replay) - len(examples),
        supervised_tokens=sum(sum(e.loss_mask) for e in examples),
        demos_sha256=sha256_file(WarmstartDir(out).skill1_demos), skill1_demos=summary, replay_demos=len(replay))
    record.write(WarmstartDir(out).bc, indent=1)
    return record


def run_skill1_warmstart(params: Params, out_dir: str | Path | None = None,
                         progress: bool = True) -> Skill1WarmstartManifest:
    """The whole Skill1 warm start (demonstrations → cloning → checkpoint → evaluation) into ``out_dir`` (default
    ``skill1_warmstart.out_dir``; a relative one under the project root); returns the manifest. A finished cloning
    stage with the same settings is re-used (an interrupted evaluation does not retrain)."""
    sw = params.skill1_warmstart
    out = resolve_project_path(out_dir or sw.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    bank = load_skillbank(params.warmstart.skills)
    law, lessons = teacher_law(bank, params.warmstart), s0_lessons(bank)
    encoder = SentenceEncoder()
    store = open_engine(params.store, "train", run_root=params.experiment.run_root)
    timings: dict[str, float] = {}
    try:
        record = finished_bc(out, params) or clone_skill1(params, store, bank, law, lessons, encoder, out, progress)
        timings.update({"demos_s": record.demos_s, "bc_s": record.wall_s})
        checkpoint = WarmstartDir(out).checkpoint.root
        started = time.monotonic()
        metrics = evaluate_skill1_warmstart(params, checkpoint, lambda: InProcessEnvironment(store.engine),
                                            list(store.catalog.task_ids("val")), lessons, encoder, progress)
        timings["eval_s"] = round(time.monotonic() - started, 1)
    finally:
        store.close()
    manifest = Skill1WarmstartManifest(
        checkpoint_sha256=weights_digest(checkpoint),
        base=BaseWarmstart(dir=sw.base, checkpoint_sha256=record.identity["base_sha256"]),
        bank_sha256=bank.sha256,
        catalog_sha256=store.catalog.sha256,
        encoder=encoder_identity(),
        params={section: section_plan(getattr(params, section)) for section in
                ("experiment", "store", "model", "sampling", "warmstart", "skill1", "skill1_warmstart")},
        lessons=lessons.identity,
        seeds={"skill1_warmstart": sw.seed, "libraries": seed32(f"{sw.seed}:skill1-libraries"),
               "replay": seed32(f"{sw.seed}:replay"), "bc": seed32(f"{sw.seed}:bc"),
               "bc_batches": seed32(f"{sw.seed}:bc-batches"), "eval": seed32(f"{sw.seed}:skill1-eval")},
        demos={"sha256": record.demos_sha256, "skill1": record.skill1_demos, "replay": record.replay_demos,
               "examples": record.examples, "dropped_too_long": record.dropped_too_long,
               "supervised_tokens": record.supervised_tokens},
        bc=record.model_dump(include={"steps", "resumed_at", "tokens", "losses"}) | {"checkpoint_dtype": CHECKPOINT_DTYPE},
        files={p.name: sha256_file(p) for p in sorted(checkpoint.iterdir()) if p.is_file()},
        timings=timings,
        metrics=metrics,
    )
    manifest.write(WarmstartDir(out).manifest, indent=1)
    return manifest
