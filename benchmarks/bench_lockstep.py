"""Rollout throughput: lockstep ``HFPolicy`` vs one-episode-at-a-time ``model.generate``.

Two workloads, each played by both arms on the same organism with the same decoding (greedy by
default, so both arms play the same episodes token for token):

- ``store`` (default): the rollouts of the method. The warm-start organism of ``--params`` plays the
  first ``--tasks`` val tasks of the real store through the agent runtime (``run_episodes``,
  the in-process store, the params' view, turn limit and per-turn token budget), in batches of
  ``--episodes`` as evaluation runs them. The lockstep arm is the ``hf`` backend; the baseline arm answers each request alone with
  plain ``generate`` over the episode's whole token stream (re-prefilled every turn, as plain
  ``generate`` does). Tokens are the completion tokens of the episodes. The speed-ups are of whole
  episodes (store, runtime and backend); ``backend_only`` repeats them over the time spent inside
  the policies' ``generate`` calls (the store's share is the same work in both arms).
  The baseline runs its own copy of the model with transformers' stock ``sdpa`` attention
  (``--baseline-attention sdpa_gqa`` gives it the lockstep's grouped-head kernel instead).
- ``synthetic``: fixed multi-turn conversations (a system prompt, a task, then one results page per
  turn as a ``tool`` message) on a randomly initialised organism, ``--max-tokens`` per turn; a
  decode-heavy stress test.

The arms alternate batch by batch (store) or turn by turn (synthetic), and both wall and
process-CPU time are reported, because the machine may be shared. Prints one JSON object: tokens/s
of each arm, the speed-ups, and how many episodes (store) or turns (synthetic) were identical.

    python benchmarks/bench_lockstep.py [--workload store|synthetic] [--threads 2] [--tasks 64] [--episodes 32]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from intraskill.chat.base import ChatRequest, Generation, SessionTokens
from intraskill.chat.chatml import IM_END, assistant_message, parse_tool_calls, render_messages
from intraskill.hashing import seed32
from intraskill.policy.hf import HFPolicy
from intraskill.policy.lockstep import GQA_SDPA

SYSTEM = (
    "You are a shopping agent in an online store. Read the task and the user profile, search with the "
    "words that matter, open the best matching product, choose every option, then buy."
)
WORDS = "red blue green black white cotton wool steel ceramic large small mug shirt lamp chair desk bag".split()
BRANDS = "Acme Borealis Cobalt Dune Ember Fjord Gale Harbor".split()


class GeneratePolicy:
    """The baseline: each request alone, one ``model.generate`` over its session's whole token stream.

    Keeps each session's exact token stream as :class:`HFPolicy` does (prompt deltas tokenized once,
    sampled tokens appended verbatim), but reuses no KV cache: every turn re-prefills the stream.
    ``model`` is the baseline's own copy of ``hf``'s model (see :func:`baseline_model`).
    """

    def __init__(self, hf: HFPolicy, model: Any) -> None:
        self.hf, self.model = hf, model
        self._streams: dict[str, tuple[list[int], int]] = {}

    @property
    def identity(self) -> dict[str, Any]:
        return {**self.hf.identity, "backend": "hf-generate"}

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        return [self._one(request) for request in requests]

    def end_session(self, session_id: str) -> SessionTokens | None:
        self._streams.pop(session_id, None)
        return None

    def _one(self, request: ChatRequest) -> Generation:
        import torch

        hf = self.hf
        stream, seen = self._streams.get(request.session_id, ([], 0))
        closing = "" if not stream else ("\n" if stream[-1] == hf.im_end_id else f"{IM_END}\n")
        delta = closing + render_messages(request.messages, request.tools, start=seen)
        stream = stream + hf.tokenizer(delta, add_special_tokens=False)["input_ids"]
        if request.temperature > 0:
            sampling = {"do_sample": True, "temperature": request.temperature, "top_p": request.top_p}
        else:
            sampling = {"do_sample": False, "top_p": None}
        with torch.inference_mode():
            out = self.model.generate(torch.tensor([stream], device=hf.device), max_new_tokens=request.max_tokens,
                                    eos_token_id=sorted(hf.stop_ids), pad_token_id=hf.pad_id, top_k=None,
                                    **sampling)
        new = out[0, len(stream):].tolist()
        self._streams[request.session_id] = (stream + new, len(request.messages) + 1)
        stopped = bool(new) and new[-1] in hf.stop_ids
        text = hf.tokenizer.decode(new[:-1] if stopped else new)
        content, calls, error = parse_tool_calls(text)
        return Generation(text, content, calls, "stop" if stopped else "length", len(stream), len(new),
                          token_ids=new, parse_error=error)


def baseline_model(hf: HFPolicy, attention: str) -> Any:
    """A copy of ``hf``'s model for the baseline, with the attention implementation ``attention``.

    ``sdpa`` is transformers' stock path (what plain ``generate`` runs); ``HFPolicy`` switches its
    own model to the grouped-head kernel on the CPU, which ``sdpa_gqa`` gives the baseline too.
    """
    import copy

    model = copy.deepcopy(hf.model)
    model.set_attn_implementation(attention)
    return model


@dataclass
class Clock:
    """Wall and process-CPU seconds spent in one arm (CPU time is robust to a shared, busy machine)."""

    wall: float = 0.0
    cpu: float = 0.0
    tokens: int = 0
    started: tuple[float, float] = field(default=(0.0, 0.0), repr=False)

    def __enter__(self) -> "Clock":
        self.started = (time.perf_counter(), time.process_time())
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall += time.perf_counter() - self.started[0]
        self.cpu += time.process_time() - self.started[1]

    def summary(self) -> dict[str, float]:
        return {"wall_s": round(self.wall, 3), "cpu_s": round(self.cpu, 3), "tokens": self.tokens,
                "tokens_per_wall_s": round(self.tokens / self.wall, 1),
                "tokens_per_cpu_s": round(self.tokens / self.cpu, 1)}


class Timed:
    """A policy whose ``generate`` calls are timed on ``clock``: the backend's share of an episode."""

    def __init__(self, policy: Any, clock: Clock) -> None:
        self.policy, self.clock = policy, clock

    @property
    def identity(self) -> dict[str, Any]:
        return self.policy.identity

    def generate(self, requests: list[ChatRequest]) -> list[Generation]:
        with self.clock:
            return self.policy.generate(requests)

    def end_session(self, session_id: str) -> SessionTokens | None:
        return self.policy.end_session(session_id)


def speedups(lock: Clock, single: Clock) -> dict[str, Any]:
    a, b = lock.summary(), single.summary()
    return {"lockstep": a, "single": b,
            "speedup_wall": round(a["tokens_per_wall_s"] / b["tokens_per_wall_s"], 2),
            "speedup_cpu": round(a["tokens_per_cpu_s"] / b["tokens_per_cpu_s"], 2)}


# --- the store workload ---------------------------------------------------------------------------
def store_workload(args: argparse.Namespace) -> dict[str, Any]:
    """The warm-start organism on the first ``args.tasks`` val tasks, both arms, batch by batch."""
    from intraskill.agent.env import InProcessEnvironment
    from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
    from intraskill.organism.shipped import ensure_warmstart
    from intraskill.params import load_params
    from intraskill.pipeline.round import open_train_store
    from intraskill.policy.factory import build_policy

    params = load_params(args.params)
    params = params.model_copy(update={"model": params.model.model_copy(update={"device": "cpu"}),
                                       "sampling": params.sampling.model_copy(update={"temperature": args.temperature})})
    checkpoint = ensure_warmstart(params) / "checkpoint"
    lockstep, _ = build_policy(params.model, str(checkpoint), store=params.store,
                               experiment=params.experiment)
    single = GeneratePolicy(lockstep, baseline_model(lockstep, args.baseline_attention))
    config = RuntimeConfig.from_params(params.sampling, params.store, params.model)
    store = open_train_store(params, split="val")
    clocks = {"lockstep": Clock(), "single": Clock()}
    backend = {"lockstep": Clock(), "single": Clock()}
    identical = turns = 0
    try:
        jobs = [EpisodeJob.create(task, 0, params.experiment.seed) for task in store.task_ids[:args.tasks]]
        factory = lambda: InProcessEnvironment(store.engine)  # noqa: E731
        run_episodes(lockstep, factory, jobs[:2], config, progress=False)  # warm-up
        for start in range(0, len(jobs), args.episodes):
            batch, played = jobs[start:start + args.episodes], {}
            for name, policy in (("lockstep", lockstep), ("single", single)):
                with clocks[name] as clock:
                    results = run_episodes(Timed(policy, backend[name]), factory, batch, config, progress=False)
                clock.tokens += sum(r.tokens.get("completion", 0) for r in results)
                backend[name].tokens = clock.tokens
                played[name] = [[t.raw_output for t in r.trace.turns] for r in results]
            identical += sum(a == b for a, b in zip(played["lockstep"], played["single"]))
            turns += sum(map(len, played["lockstep"]))
    finally:
        store.close()
    return {"workload": "store", "params": args.params, "checkpoint": str(checkpoint), "split": "val",
            "tasks": len(jobs), "episodes_per_batch": args.episodes, "turns": turns,
            "max_tokens_per_turn": config.max_tokens_per_turn, "max_turns": config.max_turns,
            "view": config.view, **speedups(clocks["lockstep"], clocks["single"]),
            "backend_only": speedups(backend["lockstep"], backend["single"]),
            "identical_episodes": identical, "total_episodes": len(jobs)}


# --- the synthetic workload -----------------------------------------------------------------------
def product_line(rng: random.Random, rank: int) -> tuple[str, str]:
    title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 8)))
    asin = "B0" + "".join(str(rng.randint(0, 9)) for _ in range(8))
    return (
        f"{rank}. {title}\n  ASIN: {asin}\n  Price: ${rng.randint(5, 300)}.{rng.randint(0, 99):02d}\n"
        f"  Brand: {rng.choice(BRANDS)}\n  Key attributes: {rng.choice(WORDS)}; {rng.choice(WORDS)}"
    ), asin


def observation(rng: random.Random, products: int) -> tuple[str, list[str]]:
    lines, asins = zip(*(product_line(rng, rank + 1) for rank in range(products)))
    head = f"Page: search results\nSearch text: {' '.join(rng.sample(WORDS, 3))}\nProduct list:\n"
    return head + "\n".join(lines), ["back to search", "next >", *asins]


def click_tool(values: list[str]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "click", "parameters": {
        "type": "object", "properties": {"value": {"type": "string", "enum": values}}, "required": ["value"]}}}


def episodes(count: int, turns: int, products: int, seed: int) -> list[list[tuple[dict[str, Any], list[dict]]]]:
    """Per episode, per turn: the new non-assistant message and the tools of that turn."""
    plan = []
    for episode in range(count):
        rng = random.Random(seed32(f"bench-lockstep/{seed}/{episode}"))
        task = {"role": "user", "content": f"Shopping task: buy a {' '.join(rng.sample(WORDS, 4))} under $80"}
        steps = [(task, [{"type": "function", "function": {"name": "search", "parameters": {
            "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}])]
        for _ in range(turns - 1):
            text, values = observation(rng, products)
            steps.append(({"role": "tool", "content": text}, [click_tool(values)]))
        plan.append(steps)
    return plan


class Conversations:
    """Fixed conversations played by one policy: one ``generate`` call per turn for all episodes."""

    def __init__(self, policy: Any, plan, max_tokens: int, temperature: float, tag: str) -> None:
        self.policy, self.plan, self.max_tokens, self.temperature, self.tag = policy, plan, max_tokens, temperature, tag
        self.conversations = [[{"role": "system", "content": SYSTEM}] for _ in plan]

    def play_turn(self, turn: int) -> list[list[int]]:
        requests = []
        for index, steps in enumerate(self.plan):
            message, tools = steps[turn]
            self.conversations[index].append(message)
            requests.append(ChatRequest(f"{self.tag}-{index}", list(self.conversations[index]), tools,
                                        self.max_tokens, self.temperature, seed=index))
        generations = self.policy.generate(requests)
        for index, generation in enumerate(generations):
            self.conversations[index].append(assistant_message(generation))
        return [g.token_ids or [] for g in generations]

    def close(self) -> None:
        for index in range(len(self.plan)):
            self.policy.end_session(f"{self.tag}-{index}")


def synthetic_workload(args: argparse.Namespace) -> dict[str, Any]:
    """Fixed conversations on a random organism (the shape of ``--params``), both arms turn by turn."""
    from intraskill.params import load_params
    from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer

    config = OrganismConfig(**load_params(args.params).model.organism.model_dump())
    plan = episodes(args.episodes, args.turns, args.products, args.seed)
    corpus = protocol_corpus() + [m["content"] for steps in plan for m, _ in steps] + [SYSTEM]
    tokenizer = train_tokenizer(corpus, config.vocab_size)
    lockstep = HFPolicy(build_organism(config, tokenizer), tokenizer, max_batch=args.episodes)
    single = GeneratePolicy(lockstep, baseline_model(lockstep, args.baseline_attention))
    warm = Conversations(lockstep, episodes(2, 2, args.products, args.seed + 1), 4, args.temperature, "warm")
    for turn in range(2):
        warm.play_turn(turn)
    warm.close()
    clocks = {"lockstep": Clock(), "single": Clock()}
    identical = total = 0
    for repeat in range(args.repeats):
        arms = {"lockstep": Conversations(lockstep, plan, args.max_tokens, args.temperature, f"r{repeat}"),
                "single": Conversations(single, plan, args.max_tokens, args.temperature, f"s{repeat}")}
        for turn in range(args.turns):  # interleaved turn by turn: the machine may be shared and noisy
            outputs = {}
            for name, arm in arms.items():
                with clocks[name] as clock:
                    outputs[name] = arm.play_turn(turn)
                clock.tokens += sum(map(len, outputs[name]))
            identical += sum(a == b for a, b in zip(outputs["lockstep"], outputs["single"]))
            total += args.episodes
        for arm in arms.values():
            arm.close()
    return {"workload": "synthetic", "organism": config.to_dict() | {"vocab": len(tokenizer)},
            "episodes": args.episodes, "turns": args.turns, "products_per_page": args.products,
            "max_tokens": args.max_tokens, "repeats": args.repeats,
            **speedups(clocks["lockstep"], clocks["single"]), "identical_turns": identical, "total_turns": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("store", "synthetic"), default="store")
    parser.add_argument("--params", default="params/organism.yaml", help="the organism (and, for store, its store)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--baseline-attention", choices=("sdpa", GQA_SDPA), default="sdpa",
                        help="the baseline's attention: transformers' stock sdpa, or the lockstep's grouped kernel")
    parser.add_argument("--episodes", type=int, default=None,
                        help="episodes played together (store: per batch, default 64; synthetic: 16)")
    parser.add_argument("--tasks", type=int, default=64, help="store: val tasks played")
    parser.add_argument("--turns", type=int, default=6, help="synthetic: turns per conversation")
    parser.add_argument("--products", type=int, default=5, help="synthetic: products per results page")
    parser.add_argument("--max-tokens", type=int, default=32, help="synthetic: tokens per turn")
    parser.add_argument("--seed", type=int, default=0, help="synthetic: conversation seed")
    parser.add_argument("--repeats", type=int, default=1, help="synthetic: repetitions")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    if args.workload == "store":
        args.episodes = args.episodes or 64
        result = store_workload(args)
    else:
        args.episodes = args.episodes or 16
        result = synthetic_workload(args)
    print(json.dumps({"benchmark": "lockstep_vs_single_generate", "threads": args.threads,
                      "temperature": args.temperature, "baseline_attention": args.baseline_attention, **result}))


if __name__ == "__main__":
    main()
