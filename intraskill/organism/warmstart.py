"""The organism's warm start: behaviour cloning from skill-conditioned expert demonstrations.

Pipeline (:func:`run_warmstart`, ``intraskill warmstart --params P``):

1. build (or reuse) the store; play ``warmstart.demos`` train tasks with the S₀-law expert under
   random chunk masks (:mod:`intraskill.organism.demos`), and ``warmstart.plan_examples`` first replies;
2. train a byte-level BPE tokenizer (single-digit tokens) on demonstration text plus the protocol
   corpus, and a random-init organism of ``model.organism``'s shape;
3. ``warmstart.drill_steps`` steps of copy drills and ``warmstart.lookup_drill_steps`` of lookup drills
   (:mod:`intraskill.organism.drills`), then
   ``warmstart.lm_steps`` steps of next-token prediction on the whole transcripts (the organism
   learns to copy ids and words from its pages and profile), then behaviour cloning: cross-entropy
   on assistant tokens only (:func:`bc_loss`; with ``warmstart.plan_targets`` the first reply's plan
   against the teacher law's exact distribution, :mod:`intraskill.organism.plan_targets`); AdamW with linear warm-up and
   cosine decay, whole
   episodes packed into token-budget micro-batches, seeded, resumable after a kill (``bc_state.pt``);
   A pretrained ``model.spec`` (``smollm2``, a local HF directory) replaces steps 2–3 by behaviour cloning
   of its own weights, with LoRA adapters (``warmstart.lora``, peft) or in full (:func:`train_pretrained`);
4. save ``checkpoint/`` (``save_pretrained`` in bfloat16 + tokenizer; a LoRA adapter alone, without tokenizer), then evaluate the *saved*
   checkpoint with the lockstep :class:`~intraskill.policy.hf.HFPolicy` on val: bare, with S₀, and
   each chunk alone (paired with bare by task and episode seed) → ``ground_truth.json``;
5. ``manifest.json``: parameters, seeds, data and weight hashes, steps, losses, timings, metrics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.agent.env import InProcessEnvironment
from intraskill.hashing import seed32, sha256_file
from intraskill.layout import WarmstartDir
from intraskill.organism.cloning import CHECKPOINT_DTYPE, BCExample, BCResult, behaviour_clone
from intraskill.organism.demos import (
    Demonstration,
    collect_demonstrations,
    demo_jobs,
    reader_jobs,
    teacher_law,
    tokenize_demonstration,
    write_demonstrations,
)
from intraskill.organism.drills import LOOKUP_TOKENS, copy_drills, drill_count, lookup_drills, ordinary_tokens
from intraskill.organism.manifest import WarmstartCloning, WarmstartManifest
from intraskill.organism.plan_targets import demonstration_targets
from intraskill.organism.truth import measure_ground_truth
from intraskill.params import Params
from intraskill.policy.factory import load_model, resolve_device
from intraskill.policy.organism import (
    OrganismConfig,
    build_organism,
    organism_split,
    protocol_corpus,
    train_tokenizer,
)
from intraskill.policy.warmstarts import training_settings
from intraskill.shop.build import open_engine
from intraskill.shop.house_codes import CODED_KEY, HouseCodes
from intraskill.skills.bank import SkillBank, load_skillbank
from intraskill.training.grpo import apply_lora

if TYPE_CHECKING:

    from intraskill.policy.expert_policy import CompetenceLaw


def train_organism(params: Params, demos: Sequence[Demonstration], out: Path, law: CompetenceLaw | None,
                   plan_demos: Sequence[Demonstration] = (),
                   progress: bool = True) -> tuple[Path, BCResult, dict[str, Any]]:
    """Tokenizer + random-init organism + behaviour cloning on ``model.device`` (``auto``: CUDA when
    present); saves ``out/checkpoint`` (bf16). ``plan_demos`` (first replies alone) join the cloning
    phase; with ``warmstart.plan_targets`` first replies are cloned on ``law``'s exact plan distribution
    (the teacher law that played ``demos``)."""
    # deferred: torch is heavy to import
    import torch

    ws = params.warmstart
    corpus = [d.text for d in demos[:ws.vocab_corpus_demos]] + protocol_corpus()
    tokenizer = train_tokenizer(corpus, params.model.organism.vocab_size)
    config = OrganismConfig(**params.model.organism.model_dump(), seed=seed32(f"{ws.seed}:organism-init"))
    model = build_organism(config, tokenizer).to(resolve_device(params.model.device))
    temperature = params.sampling.temperature  # the clone samples its plans at it

    def example(demo: Demonstration) -> BCExample:
        ids, mask = tokenize_demonstration(demo.segments, tokenizer)
        soft = demonstration_targets(demo.segments, demo.skill_ids, law, tokenizer, params.store.language,
                                     temperature) if ws.plan_targets else ()
        return BCExample(ids, mask, soft)

    examples = [e for e in map(example, demos) if len(e.input_ids) <= config.max_position]
    extra = [example(demo) for demo in plan_demos]
    vocabulary = ordinary_tokens(tokenizer)
    drills = copy_drills(vocabulary, drill_count(ws.drill_steps, ws.batch_tokens), ws.seed)
    lookups = lookup_drills(vocabulary, drill_count(ws.lookup_drill_steps, ws.batch_tokens, LOOKUP_TOKENS), ws.seed)
    torch.manual_seed(seed32(f"{ws.seed}:bc"))
    state_path = WarmstartDir(out).bc_state
    result = behaviour_clone(model, examples, steps=ws.steps, lm_steps=ws.lm_steps, drills=drills,
                             drill_steps=ws.drill_steps, lookups=lookups,
                             lookup_steps=ws.lookup_drill_steps, extra=extra, lr=ws.lr,
                             warmup_steps=ws.warmup_steps, lr_min_ratio=ws.lr_min_ratio,
                             weight_decay=ws.weight_decay, grad_clip=ws.grad_clip, batch_tokens=ws.batch_tokens,
                             pad_id=int(tokenizer.pad_token_id), seed=ws.seed, state_path=state_path,
                             state_key=json.dumps(bc_identity(out, params), sort_keys=True), progress=progress)
    checkpoint = save_checkpoint(model, tokenizer, out)
    state_path.unlink(missing_ok=True)
    data = {"examples": len(examples), "dropped_too_long": len(demos) - len(examples),
            "vocab_size": len(tokenizer), "organism": config.to_dict(),
            "parameters": sum(p.numel() for p in model.parameters()),
            "supervised_tokens": sum(sum(e.loss_mask) for e in examples),
            "plan_examples": len(extra), "soft_targets": sum(len(e.soft) for e in (*examples, *extra)),
            "tokens_per_example": sum(len(e.input_ids) for e in examples) / max(1, len(examples))}
    return checkpoint, result, data


PRETRAINED_SAVE_EVERY = 10
"""Optimizer steps between resumable states of a pretrained model's cloning (each step takes seconds on a CPU)."""


def train_pretrained(params: Params, demos: Sequence[Demonstration], out: Path,
                     progress: bool = True) -> tuple[Path, BCResult, dict[str, Any]]:
    """Behaviour cloning of ``model.spec``'s own weights (a pretrained model such as ``smollm2``) on ``demos``:
    assistant tokens only, in float32 on ``model.device``, with LoRA adapters (``warmstart.lora``, peft) or in
    full; saves ``out/checkpoint`` (the adapter alone, or the whole model; bf16, with the tokenizer).
    Demonstrations longer than the model's context are dropped."""
    # deferred: torch is heavy to import
    import torch

    ws = params.warmstart
    model, tokenizer, _, _ = load_model(params.model.spec)
    model = model.to(resolve_device(params.model.device), torch.float32)
    if ws.lora is not None:
        model = apply_lora(model, ws.lora)
    limit = int(getattr(model.config, "max_position_embeddings", 1 << 30))
    examples = [e for e in (BCExample(*tokenize_demonstration(d.segments, tokenizer)) for d in demos)
                if len(e.input_ids) <= limit]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    torch.manual_seed(seed32(f"{ws.seed}:bc"))
    state_path = WarmstartDir(out).bc_state
    result = behaviour_clone(model, examples, steps=ws.steps, lr=ws.lr, warmup_steps=ws.warmup_steps,
                             lr_min_ratio=ws.lr_min_ratio, weight_decay=ws.weight_decay, grad_clip=ws.grad_clip,
                             batch_tokens=ws.batch_tokens, pad_id=int(pad_id), seed=ws.seed, state_path=state_path,
                             state_key=json.dumps(bc_identity(out, params), sort_keys=True),
                             save_every=PRETRAINED_SAVE_EVERY, progress=progress)
    checkpoint = save_checkpoint(model, tokenizer, out)
    state_path.unlink(missing_ok=True)
    data = {"examples": len(examples), "dropped_too_long": len(demos) - len(examples),
            "parameters": sum(p.numel() for p in model.parameters()),
            "trained_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad),
            "supervised_tokens": sum(sum(e.loss_mask) for e in examples),
            "tokens_per_example": sum(len(e.input_ids) for e in examples) / max(1, len(examples))}
    return checkpoint, result, data


def save_checkpoint(model: Any, tokenizer: Any, out: Path) -> Path:
    """``save_pretrained`` of the model (in :data:`CHECKPOINT_DTYPE`, on the CPU) and its tokenizer into
    ``out/checkpoint``; returns that directory. A peft model saves its adapter alone: the spec it is merged into
    brings its own tokenizer (:func:`~intraskill.policy.factory.load_model`), and peft's generated model card is
    not kept."""
    # deferred: torch is heavy to import
    import torch

    checkpoint = WarmstartDir(out).checkpoint.root
    checkpoint.mkdir(parents=True, exist_ok=True)
    model.to("cpu", getattr(torch, CHECKPOINT_DTYPE)).save_pretrained(str(checkpoint))
    if hasattr(model, "peft_config"):
        (checkpoint / "README.md").unlink(missing_ok=True)
    else:
        tokenizer.save_pretrained(str(checkpoint))
    return checkpoint


BC_RECORD_KEYS = frozenset({"steps", "drill_steps", "lookup_drill_steps", "lm_steps", "resumed_at", "tokens", "losses"})
"""What the manifest's ``bc`` section copies from ``bc.json`` (in the record's order)."""


def expert_demos(params: Params, store: Any, bank: SkillBank, law: CompetenceLaw | None,
                 *, count: int, seed: int, max_turns: int, slip_rate: float = 0.0,
                 progress: bool = True) -> list[Demonstration]:
    """``count`` demonstrations of the law-driven expert on the ``store`` handle's tasks under the warm start's chunk
    masks (the demonstrations themselves, or with ``max_turns=1`` first replies alone); with ``warmstart.law:
    reader`` the house-code reader under generated chunks (:func:`~intraskill.organism.demos.reader_jobs`)."""
    engine, task_ids, catalog = store.engine, store.task_ids, store.catalog
    ws = params.warmstart
    codes = None
    if ws.law == "reader":  # each demonstration its own code table and generated chunks
        codes = HouseCodes(int(params.model.house_codes or 0), per_episode=True)
        colours = {t: str(catalog.task(t).user_persona.get("preferences", {}).get(CODED_KEY, ""))
                   for t in task_ids}
        jobs = reader_jobs(colours, list(task_ids), count, codes, seed, ws)
    else:
        jobs = demo_jobs(list(task_ids), count, bank.enabled_skills(), ws.mask_probability, seed,
                         bare_share=ws.bare_share, alone_share=ws.alone_share)
    return collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, law, seed=seed,
                                  max_turns=max_turns, max_actions=params.store.max_actions,
                                  language=params.store.language, view=params.model.view, slip_rate=slip_rate,
                                  plan=ws.plan, house_codes=codes, explore=ws.explore, note=ws.note,
                                  progress=progress)


def bc_identity(out: Path, params: Params) -> dict[str, Any]:
    """What a finished BC stage in ``out`` was trained from: demonstrations, tokenizer and parameters
    (the evaluation's own settings and the output location, :data:`~intraskill.policy.warmstarts.NOT_TRAINING`, excepted)."""
    plan_file = WarmstartDir(out).plan_demos
    plans = {"plan_demos_sha256": sha256_file(plan_file)} if params.warmstart.plan_examples else {}
    spec = {} if params.model.spec == "organism" else {"spec": params.model.spec}
    return {"demos_sha256": sha256_file(WarmstartDir(out).demos), **plans, **spec, "tokenizer_split": organism_split(),
            "store": params.store.model_dump(),
            "organism": params.model.organism.model_dump(), "view": params.model.view,
            "warmstart": training_settings(params.warmstart)}


def finished_bc(out: Path, params: Params) -> WarmstartCloning | None:
    """The ``bc.json`` record of a finished BC stage in ``out`` made from the same demonstrations and
    parameters (so an interrupted evaluation resumes without retraining), else ``None``. The checkpoint is a
    whole model (``config.json``) or a LoRA adapter alone (``adapter_config.json``)."""
    files = WarmstartDir(out)
    path, checkpoint = files.bc, files.checkpoint
    saved = checkpoint.is_saved() or checkpoint.adapter_config.is_file()
    if not (saved and path.is_file() and files.demos.is_file()):
        return None
    return WarmstartCloning.finished(path, bc_identity(out, params))


def run_warmstart(params: Params, out_dir: str | Path | None = None, progress: bool = True) -> WarmstartManifest:
    """The whole warm start (demos → BC → checkpoint → evaluation); returns the manifest."""
    ws = params.warmstart
    out = Path(out_dir or ws.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    files = WarmstartDir(out)
    bank = load_skillbank(ws.skills)
    law = teacher_law(bank, ws)
    timings: dict[str, float] = {}
    started = time.monotonic()
    store = open_engine(params.store, "train", run_root=params.experiment.run_root)
    bc_record = finished_bc(out, params)
    if bc_record is None:
        demos = expert_demos(params, store, bank, law, count=ws.demos, seed=ws.seed,
                             max_turns=params.sampling.max_turns, slip_rate=ws.slip_rate, progress=progress)
        write_demonstrations(demos, files.demos)
        plan_demos = expert_demos(params, store, bank, law, count=ws.plan_examples,
                                  seed=seed32(f"{ws.seed}:plan-examples"), max_turns=1, progress=progress)
        if plan_demos:
            write_demonstrations(plan_demos, files.plan_demos)
        demos_s = round(time.monotonic() - started, 1)
        if params.model.spec == "organism":
            _, bc, data = train_organism(params, demos, out, law, plan_demos, progress=progress)
        else:
            _, bc, data = train_pretrained(params, [*demos, *plan_demos], out, progress=progress)
        bc_record = WarmstartCloning(
            identity=bc_identity(out, params), demos_s=demos_s, episodes=len(demos),
            expert_success=sum(d.reward.r_success for d in demos) / max(1, len(demos)), steps=bc.steps,
            drill_steps=ws.drill_steps, lookup_drill_steps=ws.lookup_drill_steps, lm_steps=ws.lm_steps,
            resumed_at=bc.resumed_at, tokens=bc.tokens, losses=bc.losses, wall_s=round(bc.wall_s, 1), data=data)
        bc_record.write(files.bc, indent=1)
    checkpoint = files.checkpoint.root
    timings.update({"demos_s": bc_record.demos_s, "bc_s": bc_record.wall_s})
    started = time.monotonic()
    try:
        metrics, truth = measure_ground_truth(params, checkpoint, out, bank, store, progress=progress)
    finally:
        store.close()
    timings["eval_s"] = round(time.monotonic() - started, 1)
    manifest = WarmstartManifest(
        checkpoint_sha256=truth.checkpoint_sha256, bank_sha256=truth.bank_sha256,
        catalog_sha256=truth.catalog_sha256,
        params={"experiment": params.experiment.model_dump(), "store": params.store.model_dump(),
                "model": params.model.model_dump(), "sampling": params.sampling.model_dump(),
                "warmstart": ws.model_dump()},
        seeds={"warmstart": ws.seed, "organism_init": seed32(f"{ws.seed}:organism-init"),
               "bc_batches": seed32(f"{ws.seed}:bc-batches")},
        demos={"episodes": bc_record.episodes, "requested": ws.demos,
               "sha256": bc_record.identity["demos_sha256"],
               "expert_success": bc_record.expert_success, **bc_record.data},
        bc={**bc_record.model_dump(include=BC_RECORD_KEYS), "checkpoint_dtype": CHECKPOINT_DTYPE},
        files={p.name: sha256_file(p) for p in sorted(checkpoint.iterdir()) if p.is_file()},
        timings=timings,
        metrics=metrics,
        ground_truth_file=files.ground_truth.name,
    )
    manifest.write(files.manifest, indent=1)
    return manifest
