"""Rollout throughput: lockstep ``HFPolicy`` vs one-episode-at-a-time ``model.generate``.

Both arms play the same multi-turn synthetic episodes (a fixed system prompt, a task message, then
one results-page observation per turn as a ``tool`` message with the per-turn tool line) on the
same organism, with the same prompts, the same ``max_tokens`` and the same decoding (greedy by
default, so both arms produce the same tokens). The baseline keeps each episode's exact token
stream too, but re-prefills the whole conversation on every turn, as plain ``generate`` does.

The arms alternate turn by turn and both wall and process-CPU time are reported, because the
machine may be shared. Prints one JSON object: tokens/s of each arm, the speed-ups, and how many
turns produced identical tokens in both arms.

    OMP_NUM_THREADS=2 python benchmarks/bench_lockstep.py --episodes 16 --turns 6 [--params params/organism.yaml]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import dataclass
from typing import Any

from intraskill.hashing import seed32
from intraskill.policy.base import ChatRequest, Generation
from intraskill.policy.chat_format import IM_END, assistant_message, parse_tool_calls, render_messages
from intraskill.policy.hf import HFPolicy
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer

SYSTEM = (
    "You are a shopping agent in an online store. Read the task and the user profile, search with the "
    "words that matter, open the best matching product, choose every option, then buy."
)
WORDS = "red blue green black white cotton wool steel ceramic large small mug shirt lamp chair desk bag".split()
BRANDS = "Acme Borealis Cobalt Dune Ember Fjord Gale Harbor".split()


def product_line(rng: random.Random, rank: int) -> str:
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


@dataclass
class Clock:
    """Wall and process-CPU seconds spent in one arm (CPU time is robust to a shared, busy machine)."""

    wall: float = 0.0
    cpu: float = 0.0
    tokens: int = 0

    def add(self, wall: float, cpu: float, tokens: int) -> None:
        self.wall += wall
        self.cpu += cpu
        self.tokens += tokens

    def summary(self) -> dict[str, float]:
        return {"wall_s": round(self.wall, 3), "cpu_s": round(self.cpu, 3), "tokens": self.tokens,
                "tokens_per_wall_s": round(self.tokens / self.wall, 1),
                "tokens_per_cpu_s": round(self.tokens / self.cpu, 1)}


class LockstepArm:
    """All episodes advance together: one ``HFPolicy.generate`` per turn."""

    def __init__(self, policy: HFPolicy, plan, max_tokens: int, temperature: float, tag: str) -> None:
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


class SingleArm:
    """Each episode alone; each turn one ``model.generate`` over the episode's full token stream."""

    def __init__(self, policy: HFPolicy, plan, max_tokens: int, temperature: float) -> None:
        self.policy, self.plan, self.max_tokens, self.temperature = policy, plan, max_tokens, temperature
        self.messages = [[{"role": "system", "content": SYSTEM}] for _ in plan]
        self.streams: list[list[int]] = [[] for _ in plan]

    def play_turn(self, turn: int) -> list[list[int]]:
        return [self._play(index, turn) for index in range(len(self.plan))]

    def _play(self, index: int, turn: int) -> list[int]:
        import torch

        policy, messages, stream = self.policy, self.messages[index], self.streams[index]
        message, tools = self.plan[index][turn]
        messages.append(message)
        closing = "" if not stream else ("\n" if stream[-1] == policy.im_end_id else f"{IM_END}\n")
        delta = closing + render_messages(messages, tools, start=len(messages) - 1 if stream else 0)
        stream += policy.tokenizer(delta, add_special_tokens=False)["input_ids"]
        if self.temperature == 0:
            sampling = {"do_sample": False}
        else:
            sampling = {"do_sample": True, "temperature": self.temperature}
        with torch.inference_mode():
            out = policy.model.generate(torch.tensor([stream]), max_new_tokens=self.max_tokens,
                                        eos_token_id=sorted(policy.stop_ids), pad_token_id=policy.pad_id,
                                        top_k=None, top_p=None, **sampling)
        new = out[0, len(stream):].tolist()
        stream += new
        text = policy.tokenizer.decode(new[:-1] if new and new[-1] in policy.stop_ids else new)
        content, calls, error = parse_tool_calls(text)
        messages.append(assistant_message(Generation(text, content, calls, "stop", 0, 0, parse_error=error)))
        return new


def measure(arm: LockstepArm | SingleArm, turn: int, clock: Clock) -> list[list[int]]:
    wall, cpu = time.perf_counter(), time.process_time()
    outputs = arm.play_turn(turn)
    clock.add(time.perf_counter() - wall, time.process_time() - cpu, sum(map(len, outputs)))
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--products", type=int, default=5, help="products per results page")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="repetitions, each a fresh set of episodes")
    parser.add_argument("--params", default=None, help="take the organism's shape from this parameter file")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    config = OrganismConfig()
    if args.params:
        from intraskill.params import load_params

        config = OrganismConfig(**load_params(args.params).model.organism.model_dump())
    plan = episodes(args.episodes, args.turns, args.products, args.seed)
    corpus = protocol_corpus() + [m["content"] for steps in plan for m, _ in steps] + [SYSTEM]
    tokenizer = train_tokenizer(corpus, config.vocab_size)
    policy = HFPolicy(build_organism(config, tokenizer), tokenizer, max_batch=args.episodes)
    warm = LockstepArm(policy, episodes(2, 2, args.products, args.seed + 1), 4, args.temperature, "warm")
    for turn in range(2):
        warm.play_turn(turn)
    warm.close()
    lock_clock, single_clock = Clock(), Clock()
    identical = total = 0
    for repeat in range(args.repeats):
        lockstep = LockstepArm(policy, plan, args.max_tokens, args.temperature, f"r{repeat}")
        single = SingleArm(policy, plan, args.max_tokens, args.temperature)
        for turn in range(args.turns):  # interleaved turn by turn: the machine is shared and noisy
            lock_out = measure(lockstep, turn, lock_clock)
            single_out = measure(single, turn, single_clock)
            identical += sum(a == b for a, b in zip(lock_out, single_out))
            total += len(lock_out)
        lockstep.close()
    lock, single = lock_clock.summary(), single_clock.summary()
    print(json.dumps({
        "benchmark": "lockstep_vs_single_generate",
        "organism": config.to_dict() | {"vocab": len(tokenizer)},
        "episodes": args.episodes, "turns": args.turns, "products_per_page": args.products,
        "max_tokens": args.max_tokens, "temperature": args.temperature, "threads": args.threads,
        "repeats": args.repeats, "lockstep": lock, "single": single,
        "speedup_wall": round(lock["tokens_per_wall_s"] / single["tokens_per_wall_s"], 2),
        "speedup_cpu": round(lock["tokens_per_cpu_s"] / single["tokens_per_cpu_s"], 2),
        "identical_turns": identical, "total_turns": total,
    }))


if __name__ == "__main__":
    main()
