"""The reader testbed's banks and its property probes on val (never test), as JSON (``docs/testbed.md``).

    python benchmarks/probe_reader.py banks                      # write params/organism_reader_*.json
    python benchmarks/probe_reader.py probe --policy teacher [--alone] [--groups 8]   # the house-code reader
    python benchmarks/probe_reader.py probe --policy organism [--checkpoint DIR]
    python benchmarks/probe_reader.py tokens                     # property (f)'s proxy: tokens per episode

``probe`` plays the first ``--limit`` val tasks (default all 400) once per arm — bare, S₀, S₀ paraphrased, the
irrelevant bank, the two probe chunks and (``--alone``) each S₀ chunk alone — on the same jobs and episode seeds,
and reports each arm's success with its paired difference from bare (and from S₀) with 95 % task-paired bootstrap
CIs (10,000 resamples), on all tasks and on the tasks a probe concerns (their profile colour), plus how often the
colour clicked is the one the chunks state. Arms resume from ``--out`` (keyed by the policy, runtime and
chunk contents).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

_COLOUR_CLICK = re.compile(r"^click\[color=(.+)\]$")


def write_banks() -> dict[str, str]:
    from intraskill.organism.instructions import READER_BANK_FILES, reader_banks
    from intraskill.params import load_params
    from intraskill.paths import project_root
    from intraskill.shop.house_codes import HouseCodes
    from intraskill.skills.bank import save_skillbank

    params = load_params("params/organism_reader.yaml")
    banks = reader_banks(HouseCodes(params.model.house_codes), params.warmstart.seed)
    return {name: str(save_skillbank(bank, project_root() / READER_BANK_FILES[name])) for name, bank in banks.items()}


def token_cost(demos: int) -> dict[str, Any]:
    """Property (f)'s proxy: tokens per teacher demonstration and of S₀'s skill block as shown, for the default and
    the reader organism, each with a tokenizer trained on its own demonstrations (as its warm start trains one)."""
    import statistics

    from intraskill.agent.views import view_skills
    from intraskill.organism.demos import teacher_law
    from intraskill.organism.warmstart import expert_demos
    from intraskill.params import load_params
    from intraskill.policy.organism import protocol_corpus, train_tokenizer
    from intraskill.shop.build import open_engine
    from intraskill.skills.bank import load_skillbank
    from intraskill.skills.render import render_skill_block

    report = {}
    for name in ("organism", "organism_reader"):
        params = load_params(f"params/{name}.yaml")
        store = open_engine(params.store, "train", run_root=params.experiment.run_root)
        bank = load_skillbank(params.warmstart.skills)
        played = expert_demos(params, store, bank, teacher_law(bank, params.warmstart), count=demos, seed=99,
                              max_turns=params.sampling.max_turns, progress=False)
        tokenizer = train_tokenizer([d.text for d in played] + protocol_corpus(), params.model.organism.vocab_size)
        block = render_skill_block(view_skills(bank.enabled_skills(), params.model.view), params.store.language)
        report[name] = {"episodes": len(played),
                        "tokens_per_episode": statistics.mean(len(tokenizer(d.text)["input_ids"]) for d in played),
                        "turns_per_episode": statistics.mean(len(d.segments) for d in played),
                        "s0_block_tokens": len(tokenizer(block)["input_ids"])}
    return report


def colour_clicked(result: Any) -> str | None:
    """The colour of the episode's last valid ``color=`` click (``None`` without one)."""
    clicks = [m.group(1) for turn in result.trace.turns if turn.action_valid and turn.action
              and (m := _COLOUR_CLICK.match(turn.action))]
    return clicks[-1] if clicks else None


def probe(args: argparse.Namespace) -> dict[str, Any]:
    from intraskill.agent.env import InProcessEnvironment
    from intraskill.agent.runtime import RuntimeConfig
    from intraskill.evaluate.bootstrap import paired_bootstrap_ci
    from intraskill.hashing import sha256_json
    from intraskill.organism.instructions import NEW_COLOURS, READER_BANK_FILES, S0_GROUPS, SWAP
    from intraskill.organism.truth import run_arm
    from intraskill.params import load_params
    from intraskill.shop.build import open_engine
    from intraskill.shop.house_codes import CODED_KEY, HouseCodes, read_rules
    from intraskill.skills.bank import load_skillbank

    params = load_params(args.params)
    config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    if args.policy == "teacher":
        from intraskill.policy.reader_expert import ReaderExpertPolicy
        policy: Any = ReaderExpertPolicy(seed=params.warmstart.seed, language=params.store.language,
                                         max_actions=params.store.max_actions, explore=params.warmstart.explore)
    else:
        from intraskill.policy.factory import load_policy, resolve_device
        from intraskill.policy.warmstarts import resolve_checkpoint
        policy = load_policy(params.model.spec, checkpoint=args.checkpoint or resolve_checkpoint(params)[0],
                             device=resolve_device(params.model.device), dtype=params.model.dtype,
                             max_batch=params.warmstart.eval_batch_size)
    store = open_engine(params.store, "val", run_root=params.experiment.run_root)
    catalog = store.catalog
    tasks = list(store.task_ids)[:args.limit]
    colour = {t: str(catalog.task(t).user_persona["preferences"][CODED_KEY]) for t in tasks}
    banks = {name: load_skillbank(path) for name, path in READER_BANK_FILES.items()}
    arms: dict[str, tuple[Any, ...]] = {"bare": (), **{name: bank.enabled_skills() for name, bank in banks.items()}}
    if args.alone:
        arms |= {f"alone:{s.skill_id}": (s,) for s in banks["s0"].enabled_skills()}
    out = Path(args.out) / args.policy
    out.mkdir(parents=True, exist_ok=True)
    seed, samples = params.warmstart.seed, params.evaluation.bootstrap_samples
    results = {}
    for name, skills in arms.items():
        key = sha256_json({"arm": name, "policy": policy.identity, "runtime": config.to_dict(),
                           "skills": [[s.skill_id, s.content_sha256] for s in skills]})
        played = run_arm(policy, lambda: InProcessEnvironment(store.engine), tasks, skills, seed, config,
                         params.warmstart.eval_batch_size, record=out / "episodes.jsonl", key=key)
        results[name] = {r.task_id: r for r in played}
        print(f"{name}: {sum(r.reward.r_success for r in played if r.scored) / len(played):.3f}", file=sys.stderr)
    codes = HouseCodes(params.model.house_codes).table(0)
    subsets = {"all": tasks, "s0_colours": [t for t in tasks if any(colour[t] in g for g in S0_GROUPS)],
               "new_colours": [t for t in tasks if colour[t] in NEW_COLOURS],
               "swap_colours": [t for t in tasks if colour[t] in SWAP]}

    def success(name: str, task: int) -> float:
        result = results[name][task]
        return float(result.reward.r_success) if result.scored else 0.0

    def paired(a: str, b: str, subset: list[int]) -> dict[str, Any]:
        ci = paired_bootstrap_ci([success(a, t) for t in subset], [success(b, t) for t in subset],
                                 f"reader:{a}:{b}", samples=samples, seed_base=seed)
        return {"mean": round(ci.mean_difference, 4), "ci95": [round(x, 4) for x in ci.ci95], "pairs": ci.pairs}

    def follows(name: str, subset: list[int]) -> float | None:
        """Share of the subset's episodes whose colour click is the colour the arm's rules state for its code."""
        stated = read_rules(s.content for s in arms[name])
        clicked = [colour_clicked(results[name][t]) for t in subset if codes[colour[t]] in stated]
        matched = [c == stated[codes[colour[t]]] for c, t in zip(clicked, [t for t in subset
                   if codes[colour[t]] in stated]) if c is not None]
        return round(sum(matched) / len(matched), 4) if matched else None

    if args.groups:
        groups = all_wrong_groups(policy, store, tasks[:args.group_tasks], banks["s0"].enabled_skills(), config,
                                  params, args.groups)
    report: dict[str, Any] = {"policy": args.policy, "params": args.params, "tasks": len(tasks),
                              "subset_sizes": {k: len(v) for k, v in subsets.items()}, "arms": {}}
    for name in arms:
        entry: dict[str, Any] = {"success": {k: round(sum(success(name, t) for t in v) / max(1, len(v)), 4)
                                             for k, v in subsets.items()}}
        if name != "bare":
            entry["minus_bare"] = {k: paired("bare", name, v) for k, v in subsets.items() if v}
            entry["follows_rules"] = follows(name, tasks)
        if name not in ("bare", "s0"):
            entry["minus_s0"] = paired("s0", name, tasks)
        report["arms"][name] = entry
    if args.groups:
        report["all_wrong_groups"] = groups
    return report


def all_wrong_groups(policy: Any, store: Any, tasks: list[int], skills: Any, config: Any, params: Any,
                     size: int) -> dict[str, Any]:
    """Share of groups (``size`` episodes of one task) with no success: bare, and with one Bernoulli(0.5) mask of
    S₀ per group (the round's masked groups, drawn with the warm start's mask rule)."""
    from intraskill.agent.env import InProcessEnvironment
    from intraskill.agent.runtime import EpisodeJob, run_episodes
    from intraskill.organism.demos import chunk_mask

    seed = params.warmstart.seed
    shares = {}
    for arm in ("bare", "masked"):
        jobs = [EpisodeJob.create(t, k, seed, () if arm == "bare" else chunk_mask(skills, 0.5, f"{seed}:group:{t}"))
                for t in tasks for k in range(size)]
        wins: dict[int, float] = {}
        for start in range(0, len(jobs), params.warmstart.eval_batch_size):
            batch = jobs[start:start + params.warmstart.eval_batch_size]
            for result in run_episodes(policy, lambda: InProcessEnvironment(store.engine), batch, config,
                                       progress=False):
                won = float(result.reward.r_success) if result.scored else 0.0
                wins[result.task_id] = wins.get(result.task_id, 0.0) + won
        shares[arm] = round(sum(v == 0 for v in wins.values()) / len(wins), 4)
    return {"group_size": size, "groups": len(tasks), "all_wrong": shares}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("banks", help="write the reader banks into params/")
    sub.add_parser("tokens", help="tokens per demonstration and of S0's block, default vs reader").add_argument(
        "--demos", type=int, default=300)
    run = sub.add_parser("probe", help="play the arms on val and print the paired differences")
    run.add_argument("--params", default="params/organism_reader.yaml")
    run.add_argument("--policy", choices=("teacher", "organism"), default="teacher")
    run.add_argument("--checkpoint", default=None, help="organism checkpoint (default: the params' warm start)")
    run.add_argument("--limit", type=int, default=None, help="first val tasks (default: all)")
    run.add_argument("--alone", action="store_true", help="also each S0 chunk alone (the planted truth)")
    run.add_argument("--groups", type=int, default=0, help="also all-wrong groups of this size (bare, S0-masked)")
    run.add_argument("--group-tasks", type=int, default=200, help="val tasks of the all-wrong groups")
    run.add_argument("--out", default="runs/organism_reader/probe")
    args = parser.parse_args()
    commands = {"banks": write_banks, "tokens": lambda: token_cost(args.demos), "probe": lambda: probe(args)}
    print(json.dumps(commands[args.command](), indent=1))


if __name__ == "__main__":
    main()
