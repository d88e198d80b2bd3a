"""How fast the organism learns the expert's copy decisions under behaviour cloning (one JSON line).

Usage::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/probe_organism_copy.py \\
        [--demos runs/warmstart/demos.jsonl] [--checkpoint runs/warmstart/checkpoint] \\
        [--minutes 15] [--arms local,full,lm,local-lm] [--batch 32] [--eval-every 15] [--threads 1]

Every assistant turn of the recorded demonstrations becomes one decision. Two arms train a fresh
organism (the checkpoint's tokenizer and shape, new random weights) for the same training wall time
(``--minutes`` is split evenly between the arms, evaluation included):

- ``local``: decision-local examples: the system message (persona, skill block, tool instructions)
  plus only the latest observation message, exactly as the runtime renders them
  (``render_messages([system, observation], tools)`` is that text), target the assistant tool call;
  batches of ``--batch`` examples;
- ``full``: whole episodes (:func:`~intraskill.organism.demos.tokenize_demonstration`, every assistant
  turn supervised), as the warm start trains; batches of about the same number of tokens;
- ``lm`` / ``local-lm``: the same examples with the loss on every token (pages and prompts too), as
  the warm start's ``lm_steps`` phase trains.

Held-out decisions (episodes with ``unit_draw("probe-heldout:<episode_id>") < 0.1``) are decoded
greedily every ``--eval-every`` steps, in the arm's own context format (the local context, or the
whole conversation so far), and scored by exact match of the tool call, split by decision kind:
``query`` (search), ``first_asin`` (click on the first result's ASIN), ``option`` (``axis=value``)
and ``buy`` (``buy now``). Teacher-forced token accuracy and loss on the target tokens are reported
beside it, since they move before exact match does.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from intraskill.chat.chatml import IM_END, parse_tool_calls
from intraskill.hashing import unit_draw
from intraskill.organism.cloning import BCExample, bc_loss, collate
from intraskill.organism.demos import Demonstration, read_demonstrations, tokenize_demonstration

KINDS = ("query", "first_asin", "option", "buy")
FIRST_ASIN = re.compile(r"^1\. (?:.*\n\s+ASIN: (\S+)|(\d+) \| )", re.MULTILINE)


@dataclass(frozen=True)
class Decision:
    """One expert turn: its two context texts, the target completion and its kind."""

    episode_id: str
    turn: int
    local_prompt: str
    full_prompt: str
    completion: str
    kind: str


def decision_kind(observation: str, completion: str) -> str:
    """``query`` / ``first_asin`` / ``other_asin`` / ``option`` / ``buy`` / ``navigate`` of one turn."""
    _, calls, _ = parse_tool_calls(completion)
    if not calls:
        return "invalid"
    if calls[0].name == "search":
        return "query"
    value = str(json.loads(calls[0].arguments).get("value", ""))
    if value == "buy now":
        return "buy"
    if "=" in value:
        return "option"
    if value.isdigit():
        first = FIRST_ASIN.search(observation)
        return "first_asin" if first and value in first.groups() else "other_asin"
    return "navigate"


def decisions_of(demo: Demonstration) -> list[Decision]:
    """Every turn of ``demo`` with its decision-local and full-history prompt texts."""
    first_prompt = demo.segments[0][0]
    cut = first_prompt.index(IM_END + "\n") + len(IM_END) + 1
    system = first_prompt[:cut]
    history = ""
    out = []
    for turn, (prompt, completion) in enumerate(demo.segments):
        observation = first_prompt[cut:] if turn == 0 else prompt.removeprefix("\n")
        out.append(Decision(demo.episode_id, turn, system + observation, history + prompt, completion,
                            decision_kind(observation, completion)))
        history += prompt + completion + IM_END
    return out


def encode(prompt: str, completion: str, tokenizer: Any) -> BCExample:
    """Prompt masked 0; the completion and its ``<|im_end|>`` masked 1."""
    ids, mask = tokenize_demonstration([(prompt, completion)], tokenizer)
    return BCExample(ids, mask)


def greedy_decode(model: Any, prompts: list[list[int]], im_end: int, pad: int, max_new: int) -> list[list[int]]:
    """Batched greedy decoding with a KV cache; left padding with explicit position ids."""
    import torch
    from transformers import DynamicCache

    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        ids[row, width - len(prompt):] = torch.tensor(prompt)
        mask[row, width - len(prompt):] = 1
    positions = (mask.cumsum(1) - 1).clamp(min=0)
    cache = DynamicCache()
    out: list[list[int]] = [[] for _ in prompts]
    done = torch.zeros(len(prompts), dtype=torch.bool)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache,
                       use_cache=True).logits[:, -1]
        for _ in range(max_new):
            token = logits.argmax(-1)
            for row in range(len(prompts)):
                if not done[row]:
                    out[row].append(int(token[row]))
            done |= token == im_end
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones((len(prompts), 1), dtype=torch.long)], 1)
            positions = positions[:, -1:] + 1
            logits = model(input_ids=token[:, None], attention_mask=mask, position_ids=positions,
                           past_key_values=cache, use_cache=True).logits[:, -1]
    return out


def evaluate(model: Any, tokenizer: Any, heldout: list[Decision], arm: str, eval_batch: int) -> dict[str, Any]:
    """Exact match (greedy), teacher-forced token accuracy and loss per decision kind."""
    import torch

    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    pad = tokenizer.pad_token_id
    model.eval()
    stats: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    samples: dict[str, str] = {}
    for start in range(0, len(heldout), eval_batch):
        chunk = heldout[start:start + eval_batch]
        examples = [encode(d.local_prompt if arm.startswith("local") else d.full_prompt, d.completion, tokenizer)
                    for d in chunk]
        ids, labels = collate(examples, pad)
        with torch.no_grad():
            logits = model(input_ids=ids).logits[:, :-1].float()
        targets = labels[:, 1:]
        losses = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100,
                                                   reduction="none")
        hits = (logits.argmax(-1) == targets) & (targets != -100)
        prompts = [e.input_ids[:e.loss_mask.index(1)] for e in examples]
        generated = greedy_decode(model, prompts, im_end, pad, max_new=max(sum(e.loss_mask) for e in examples) + 8)
        for row, decision in enumerate(chunk):
            text = tokenizer.decode([t for t in generated[row] if t != im_end], skip_special_tokens=False)
            entry = stats[decision.kind]
            entry["n"] += 1
            entry["exact"] += float(text.strip() == decision.completion.strip())
            entry["tokens"] += float((targets[row] != -100).sum())
            entry["token_hits"] += float(hits[row].sum())
            entry["loss_sum"] += float(losses[row].sum())
            samples.setdefault(decision.kind, text)
    model.train()
    return {kind: {"n": int(s["n"]), "exact": round(s["exact"] / s["n"], 3),
                   "token_acc": round(s["token_hits"] / s["tokens"], 3),
                   "target_loss": round(s["loss_sum"] / s["tokens"], 3), "sample": samples[kind][:120]}
            for kind, s in sorted(stats.items())}


def train_arm(arm: str, train: list[BCExample], heldout: list[Decision], tokenizer: Any, config: Any,
              args: argparse.Namespace, budget_s: float, batch_rows: int) -> dict[str, Any]:
    """Train a fresh organism on ``train`` until ``budget_s`` (training + evaluation) is spent."""
    import torch

    from intraskill.policy.organism import OrganismConfig, build_organism

    model = build_organism(OrganismConfig(**config, seed=args.seed), tokenizer).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.95))
    rng = random.Random(f"{args.seed}:probe:{arm}")
    order: list[int] = []
    curve: list[dict[str, Any]] = []
    started = time.perf_counter()
    train_s = eval_s = 0.0
    step = tokens = 0
    losses: list[float] = []
    while time.perf_counter() - started < budget_s:
        if len(order) < batch_rows:
            order += rng.sample(range(len(train)), len(train))
        batch = [train[i] for i in order[:batch_rows]]
        del order[:batch_rows]
        tick = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = args.lr * min(1.0, (step + 1) / args.warmup)
        ids, labels = collate(batch, tokenizer.pad_token_id)
        loss = bc_loss(model, ids, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        train_s += time.perf_counter() - tick
        step += 1
        tokens += int(ids.numel())
        losses.append(float(loss.detach()))
        if step % args.eval_every == 0:
            tick = time.perf_counter()
            point = {"step": step, "train_s": round(train_s, 1), "train_loss": round(sum(losses[-5:]) / len(losses[-5:]), 4),
                     "kinds": evaluate(model, tokenizer, heldout, arm, args.eval_batch)}
            eval_s += time.perf_counter() - tick
            curve.append(point)
            print(json.dumps({"arm": arm, **point}), file=sys.stderr, flush=True)
    if not curve or curve[-1]["step"] != step:
        tick = time.perf_counter()
        curve.append({"step": step, "train_s": round(train_s, 1), "train_loss": round(losses[-1], 4),
                      "kinds": evaluate(model, tokenizer, heldout, arm, args.eval_batch)})
        eval_s += time.perf_counter() - tick
        print(json.dumps({"arm": arm, **curve[-1]}), file=sys.stderr, flush=True)
    mean_len = sum(len(e.input_ids) for e in train) / len(train)
    supervised = sum(sum(e.loss_mask) for e in train) / sum(len(e.input_ids) for e in train)
    return {"arm": arm, "examples": len(train), "rows_per_batch": batch_rows, "tokens_per_example": round(mean_len, 1),
            "supervised_fraction": round(supervised, 4), "steps": step, "train_s": round(train_s, 1),
            "eval_s": round(eval_s, 1), "steps_per_s": round(step / train_s, 4),
            "padded_tokens_per_s": round(tokens / train_s, 1), "curve": curve}


def main() -> None:
    import torch
    from transformers import AutoConfig, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demos", default="runs/warmstart/demos.jsonl")
    parser.add_argument("--checkpoint", default="runs/warmstart/checkpoint")
    parser.add_argument("--minutes", type=float, default=15.0, help="total budget, split evenly over the arms")
    parser.add_argument("--arms", default="local,full")
    parser.add_argument("--batch", type=int, default=32, help="examples per step (local arm)")
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--eval-every", type=int, default=15)
    parser.add_argument("--eval-per-kind", type=int, default=12)
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    tokenizer = AutoTokenizer.from_pretrained(args.checkpoint)
    hf = AutoConfig.from_pretrained(args.checkpoint)
    config = {"vocab_size": hf.vocab_size, "hidden_size": hf.hidden_size, "num_layers": hf.num_hidden_layers,
              "num_heads": hf.num_attention_heads, "num_kv_heads": hf.num_key_value_heads, "head_dim": hf.head_dim,
              "intermediate_size": hf.intermediate_size, "max_position": hf.max_position_embeddings}
    demos = read_demonstrations(args.demos)
    is_heldout = {d.episode_id: unit_draw(f"probe-heldout:{d.episode_id}") < 0.1 for d in demos}
    train_demos = [d for d in demos if not is_heldout[d.episode_id]]
    decisions = [x for d in demos for x in decisions_of(d)]
    kind_counts: dict[str, int] = defaultdict(int)
    for decision in decisions:
        kind_counts[decision.kind] += 1
    pool = sorted((x for x in decisions if is_heldout[x.episode_id] and x.kind in KINDS),
                  key=lambda x: unit_draw(f"probe-eval:{x.episode_id}:{x.turn}"))
    heldout = [x for kind in KINDS for x in [y for y in pool if y.kind == kind][:args.eval_per_kind]]
    local_train = [encode(x.local_prompt, x.completion, tokenizer) for x in decisions if not is_heldout[x.episode_id]]
    full_train = [BCExample(*tokenize_demonstration(d.segments, tokenizer)) for d in train_demos]
    arms = [a for a in args.arms.split(",") if a]
    budget_s = args.minutes * 60.0 / len(arms)
    results = []
    for arm in arms:
        if arm in ("local", "local-lm"):
            train = local_train if arm == "local" else [BCExample(e.input_ids, [1] * len(e.input_ids))
                                                        for e in local_train]
            results.append(train_arm(arm, train, heldout, tokenizer, config, args, budget_s, args.batch))
        elif arm in ("full", "lm"):
            local_len = sum(len(e.input_ids) for e in local_train) / len(local_train)
            full_len = sum(len(e.input_ids) for e in full_train) / len(full_train)
            rows = max(1, round(args.batch * local_len / full_len))
            train = full_train if arm == "full" else [BCExample(e.input_ids, [1] * len(e.input_ids))
                                                      for e in full_train]
            results.append(train_arm(arm, train, heldout, tokenizer, config, args, budget_s, rows))
        else:
            raise SystemExit(f"--arms: unknown arm {arm!r} (expected local, local-lm, full or lm)")
    print(json.dumps({"benchmark": "probe_organism_copy", "demos": len(demos), "train_episodes": len(train_demos),
                      "decision_kinds": dict(sorted(kind_counts.items())),
                      "heldout_per_kind": {k: sum(x.kind == k for x in heldout) for k in KINDS},
                      "organism": config, "lr": args.lr, "warmup": args.warmup, "threads": torch.get_num_threads(),
                      "minutes": args.minutes, "arms": results}))


if __name__ == "__main__":
    main()
