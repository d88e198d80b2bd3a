"""Rollout throughput: lockstep ``HFPolicy`` vs one-episode-at-a-time ``model.generate``.

Both arms play the same multi-turn synthetic episodes (a fixed system prompt, a task message, then
one results-page observation per turn as a ``tool`` message with the per-turn tool line) on the
same organism, with the same prompts, the same ``max_tokens`` and the same decoding (greedy by
default, so both arms produce the same tokens). The baseline keeps each episode's exact token
stream too, but re-prefills the whole conversation on every turn, as plain ``generate`` does.

Prints one JSON object: tokens/s of each arm, the speed-up, and how many turns produced identical
tokens in both arms.

    OMP_NUM_THREADS=2 python benchmarks/bench_lockstep.py --episodes 16 --turns 6
"""

from __future__ import annotations

import argparse
import json
import random
import time
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


def run_lockstep(policy: HFPolicy, plan, max_tokens: int, temperature: float) -> tuple[float, list[list[int]]]:
    conversations = [[{"role": "system", "content": SYSTEM}] for _ in plan]
    outputs: list[list[int]] = []
    start = time.perf_counter()
    for turn in range(len(plan[0])):
        requests = []
        for index, steps in enumerate(plan):
            message, tools = steps[turn]
            conversations[index].append(message)
            requests.append(ChatRequest(f"ep-{index}", list(conversations[index]), tools, max_tokens,
                                        temperature, seed=index))
        for index, generation in enumerate(policy.generate(requests)):
            conversations[index].append(assistant_message(generation))
            outputs.append(generation.token_ids or [])
    elapsed = time.perf_counter() - start
    for index in range(len(plan)):
        policy.end_session(f"ep-{index}")
    return elapsed, outputs


def run_single(policy: HFPolicy, plan, max_tokens: int, temperature: float) -> tuple[float, list[list[int]]]:
    """Baseline: each episode alone, each turn one ``model.generate`` over the full token stream."""
    import torch

    model, tokenizer = policy.model, policy.tokenizer
    stops = sorted(policy.stop_ids)
    per_episode: list[list[list[int]]] = []
    start = time.perf_counter()
    for index, steps in enumerate(plan):
        messages: list[dict] = [{"role": "system", "content": SYSTEM}]
        stream: list[int] = []
        turns = []
        for turn, (message, tools) in enumerate(steps):
            messages.append(message)
            closing = "" if not stream else ("\n" if stream[-1] == policy.im_end_id else f"{IM_END}\n")
            delta = closing + render_messages(messages, tools, start=0 if not stream else len(messages) - 1)
            stream += tokenizer(delta, add_special_tokens=False)["input_ids"]
            sampling = {"do_sample": False} if temperature == 0 else {"do_sample": True, "temperature": temperature}
            with torch.inference_mode():
                out = model.generate(torch.tensor([stream]), max_new_tokens=max_tokens, eos_token_id=stops,
                                     pad_token_id=policy.pad_id, top_k=None, top_p=None, **sampling)
            new = out[0, len(stream):].tolist()
            stream += new
            turns.append(new)
            text = tokenizer.decode(new[:-1] if new and new[-1] in policy.stop_ids else new)
            content, calls, error = parse_tool_calls(text)
            messages.append(assistant_message(Generation(text, content, calls, "stop", 0, 0, parse_error=error)))
        per_episode.append(turns)
    elapsed = time.perf_counter() - start
    ordered = [per_episode[e][t] for t in range(len(plan[0])) for e in range(len(plan))]
    return elapsed, ordered


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--products", type=int, default=5, help="products per results page")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=2, help="interleaved repetitions; best time of each arm")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    config = OrganismConfig()
    plan = episodes(args.episodes, args.turns, args.products, args.seed)
    corpus = protocol_corpus() + [m["content"] for steps in plan for m, _ in steps] + [SYSTEM]
    tokenizer = train_tokenizer(corpus, config.vocab_size)
    policy = HFPolicy(build_organism(config, tokenizer), tokenizer, max_batch=args.episodes)
    run_lockstep(policy, episodes(2, 2, args.products, args.seed + 1), 4, args.temperature)  # warm-up
    lock_times, single_times = [], []
    for _ in range(args.repeats):  # interleaved, best of N: the machine is shared and noisy
        lock_s, lock_out = run_lockstep(policy, plan, args.max_tokens, args.temperature)
        single_s, single_out = run_single(policy, plan, args.max_tokens, args.temperature)
        lock_times.append(lock_s)
        single_times.append(single_s)
    lock_s, single_s = min(lock_times), min(single_times)
    lock_tokens = sum(map(len, lock_out))
    single_tokens = sum(map(len, single_out))
    print(json.dumps({
        "benchmark": "lockstep_vs_single_generate",
        "organism": config.to_dict() | {"vocab": len(tokenizer)},
        "episodes": args.episodes, "turns": args.turns, "max_tokens": args.max_tokens,
        "temperature": args.temperature, "threads": args.threads, "repeats": args.repeats,
        "lockstep_times_s": [round(t, 3) for t in lock_times], "single_times_s": [round(t, 3) for t in single_times],
        "lockstep": {"seconds": round(lock_s, 3), "tokens": lock_tokens, "tokens_per_s": round(lock_tokens / lock_s, 1)},
        "single": {"seconds": round(single_s, 3), "tokens": single_tokens,
                   "tokens_per_s": round(single_tokens / single_s, 1)},
        "speedup": round((lock_tokens / lock_s) / (single_tokens / single_s), 2),
        "identical_turns": sum(a == b for a, b in zip(lock_out, single_out)),
        "total_turns": len(lock_out),
    }))


if __name__ == "__main__":
    main()
