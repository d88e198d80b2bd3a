"""Lockstep HF policy: cached batched decoding equals uncached single-session decoding."""

from __future__ import annotations

import pytest
import torch

from intraskill.chat.base import ChatRequest, ContextFull, Policy
from intraskill.chat.chatml import IM_END, assistant_message, render_messages
from intraskill.policy import hf
from intraskill.policy.hf import HFPolicy
from intraskill.policy.lockstep import GQA_SDPA, additive_mask, prefill_groups, use_gqa_sdpa
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer

TINY = OrganismConfig(
    vocab_size=400, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32,
    intermediate_size=128, max_position=2048, initializer_range=0.3, seed=7,
)
CLICK = {
    "type": "function",
    "function": {"name": "click", "parameters": {
        "type": "object", "properties": {"value": {"type": "string", "enum": ["buy now", "B012"]}},
        "required": ["value"]}},
}


@pytest.fixture(scope="module")
def organism():
    tokenizer = train_tokenizer(protocol_corpus(), TINY.vocab_size)
    return build_organism(TINY, tokenizer), tokenizer


def conversations(count: int) -> dict[str, list[dict]]:
    """Sessions whose prompts have clearly different lengths."""
    return {
        f"ep-{i}": [
            {"role": "system", "content": "You are a shopping agent." + " Be brief." * (3 * i)},
            {"role": "user", "content": f"Shopping task: buy item {i}{i + 1}{i + 2}" + " now" * i},
        ]
        for i in range(count)
    }


def uncached_greedy(model, prompt: list[int], budget: int, stops: frozenset[int]) -> tuple[list[int], list[float]]:
    """Reference: one session alone, a full forward over the whole stream for every token."""
    ids, out, logps = list(prompt), [], []
    for _ in range(budget):
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1].float()
        logp = torch.log_softmax(logits, -1)
        token = int(logp.argmax())
        out.append(token)
        logps.append(float(logp[token]))
        ids.append(token)
        if token in stops:
            break
    return out, logps


def play(policy: HFPolicy, convs: dict[str, list[dict]], turns: int, temperature: float, budgets: list[int]):
    """Drive every conversation for ``turns`` turns; yields (turn, generations) after each."""
    for turn in range(turns):
        requests = [
            ChatRequest(sid, list(messages), [CLICK], max_tokens=budgets[i], temperature=temperature, seed=100 + i)
            for i, (sid, messages) in enumerate(convs.items())
        ]
        generations = policy.generate(requests)
        yield turn, requests, generations
        for (sid, messages), generation in zip(convs.items(), generations):
            messages.append(assistant_message(generation))
            messages.append({"role": "tool", "content": f"Page: search results {turn}" + " x" * (turn + len(sid))})


@pytest.mark.parametrize("prefill_chunk_tokens", [8192, 7], ids=["one-prefill", "sliced-prefill"])
def test_lockstep_greedy_equals_uncached_single_sessions(organism, prefill_chunk_tokens: int) -> None:
    model, tokenizer = organism
    reference = HFPolicy(model, tokenizer)
    prompt = tokenizer(render_messages(conversations(1)["ep-0"], [CLICK]), add_special_tokens=False)["input_ids"]
    # an extra stop token the model does emit, so sequences in one batch end at different steps
    early, _ = uncached_greedy(model, prompt, 6, frozenset())
    # 7 tokens over 3 sessions: the prefill runs in slices of 2 columns
    policy = HFPolicy(model, tokenizer, stop_token_ids=[reference.im_end_id, early[3]], max_batch=3,
                      prefill_chunk_tokens=prefill_chunk_tokens)
    assert isinstance(policy, Policy)
    finishes = set()
    for _, requests, generations in play(policy, conversations(4), turns=3, temperature=0.0, budgets=[6, 9, 12, 7]):
        for request, generation in zip(requests, generations):
            stream = policy._sessions[request.session_id].input_ids
            assert stream[-generation.completion_tokens:] == generation.token_ids
            prompt_ids = stream[: generation.prompt_tokens]
            expected, expected_logps = uncached_greedy(model, prompt_ids, request.max_tokens, policy.stop_ids)
            assert generation.token_ids == expected, request.session_id
            assert generation.logprobs == pytest.approx(expected_logps, abs=1e-4)
            finishes.add(generation.finish_reason)
    assert finishes == {"stop", "length"}


def test_session_tokens_align_with_a_full_forward(organism) -> None:
    model, tokenizer = organism
    policy = HFPolicy(model, tokenizer)
    temperature = 0.7
    convs = conversations(3)
    completions: dict[str, list[list[int]]] = {sid: [] for sid in convs}
    for _, requests, generations in play(policy, convs, turns=2, temperature=temperature, budgets=[8, 5, 11]):
        for request, generation in zip(requests, generations):
            completions[request.session_id].append(generation.token_ids)
    for sid in convs:
        tokens = policy.end_session(sid)
        assert tokens is not None and sid not in policy.session_ids
        sampled = [t for t, m in zip(tokens.input_ids, tokens.loss_mask) if m == 1]
        assert sampled == [t for turn in completions[sid] for t in turn]
        assert all(lp == 0.0 for lp, m in zip(tokens.logprobs, tokens.loss_mask) if m == 0)
        with torch.no_grad():
            logits = model(torch.tensor([tokens.input_ids])).logits[0].float()
        logp = torch.log_softmax(logits / temperature, -1)
        for pos, (token, mask, recorded) in enumerate(zip(tokens.input_ids, tokens.loss_mask, tokens.logprobs)):
            if mask:
                assert recorded == pytest.approx(float(logp[pos - 1, token]), abs=1e-4)
        # prompt tokens decode to the rendered conversation: the first turn's text opens the stream
        text = tokenizer.decode(tokens.input_ids, skip_special_tokens=False)
        assert text.startswith(render_messages(conversations(3)[sid], [CLICK]))
    assert policy.end_session("ep-0") is None


def test_seeded_sampling_does_not_depend_on_batch_company(organism) -> None:
    model, tokenizer = organism
    convs = conversations(4)
    request = ChatRequest("ep-2", convs["ep-2"], [CLICK], max_tokens=10, temperature=1.0, seed=42)
    alone = HFPolicy(model, tokenizer).generate([request])[0]
    others = [ChatRequest(s, m, [CLICK], max_tokens=6, temperature=1.0, seed=9) for s, m in convs.items() if s != "ep-2"]
    batched = HFPolicy(model, tokenizer).generate(others[:2] + [request] + others[2:])[2]
    assert batched.token_ids == alone.token_ids
    reseeded = HFPolicy(model, tokenizer).generate([ChatRequest("ep-2", convs["ep-2"], [CLICK], 10, 1.0, seed=43)])
    assert reseeded[0].token_ids != alone.token_ids


def test_replies_do_not_depend_on_how_many_sessions_share_a_forward(organism) -> None:
    """What a larger evaluation batch relies on (``evaluation.batch_size``): six sessions sampled over three turns in
    forwards of 2 rows (prefill slices of 4 columns) or of all 6 (slices of 1) draw the same tokens. Log-probs agree to
    float rounding only (a matmul rounds a row by the rows beside it): a draw within that rounding of a tie could
    differ, which the bench's trace digests check on real runs (docs/ledger.md)."""
    model, tokenizer = organism
    replies = {}
    for rows in (2, 6):
        policy = HFPolicy(model, tokenizer, max_batch=rows, prefill_chunk_tokens=8)
        replies[rows] = [(g.token_ids, g.logprobs) for _, _, generations in
                         play(policy, conversations(6), turns=3, temperature=1.0, budgets=[5, 9, 12, 7, 3, 10])
                         for g in generations]
    assert [tokens for tokens, _ in replies[6]] == [tokens for tokens, _ in replies[2]]
    for (_, wide), (_, narrow) in zip(replies[6], replies[2]):
        assert wide == pytest.approx(narrow, abs=1e-4)
    assert len({tuple(tokens) for tokens, _ in replies[2]}) > 6  # sampled replies that differ


def test_siblings_share_one_prefill_with_exactly_the_replies_of_their_own(organism, monkeypatch) -> None:
    """A GRPO group's sessions open with the same prompt: one is prefilled and the others copy its cache. Every reply
    and later turn is what each row's own prefill gives, log-probs to float rounding (a batched matmul may round a
    row differently by its place in the batch; copies now start from the very same logits)."""
    model, tokenizer = organism
    prompt = conversations(3)
    convs = {f"g-{k}": list(prompt["ep-1"]) for k in range(3)} | {"other": list(prompt["ep-2"])}
    prefills = []
    forward = HFPolicy._forward

    def counted(self, input_ids, *args):
        prefills.append(input_ids.shape)
        return forward(self, input_ids, *args)

    def replies(policy: HFPolicy) -> list[tuple[list[int], list[float]]]:
        return [(g.token_ids, g.logprobs) for _, _, generations in play(policy, {s: list(m) for s, m in convs.items()},
                                                                       2, 1.0, [9, 9, 9, 9]) for g in generations]

    monkeypatch.setattr(HFPolicy, "_forward", counted)
    shared = replies(HFPolicy(model, tokenizer))
    assert prefills[0][0] == 2  # the three siblings' prompt once, the other prompt once
    every_row = lambda rows, suffixes: (list(range(len(rows))), list(range(len(rows))))
    monkeypatch.setattr(hf, "_distinct_prefills", every_row)
    prefills.clear()
    own = replies(HFPolicy(model, tokenizer))
    assert prefills[0][0] == 4
    assert [tokens for tokens, _ in shared] == [tokens for tokens, _ in own]
    for (_, mine), (_, theirs) in zip(shared, own):
        assert mine == pytest.approx(theirs, abs=1e-5)
    assert len({tuple(tokens) for tokens, _ in shared[:3]}) > 1  # each sibling still samples its own reply


def test_rows_prefilled_in_length_groups_reply_as_one_padded_slab(organism, monkeypatch) -> None:
    """An evaluation prefills a turn's rows in groups of similar length, each in its own slab, and decodes them
    together from one slab of their real keys: every reply (two siblings sharing a prefill among them) and every
    later turn is what one padded slab of the whole batch gives, log-probs to float rounding (a matmul rounds a row
    by the rows beside it)."""
    model, tokenizer = organism
    prompts = conversations(5)
    convs = {**prompts, "twin": list(prompts["ep-3"])}  # ep-3 and its twin share one prefill
    prefills = []
    forward = HFPolicy._forward

    def counted(self, input_ids, *args):
        prefills.append(tuple(input_ids.shape))
        return forward(self, input_ids, *args)

    def replies(policy: HFPolicy, budgets: tuple[int, ...] = (5, 9, 12, 7, 3, 10)) -> list[tuple[list[int], list[float]]]:
        return [(g.token_ids, g.logprobs) for _, _, generations in play(policy, convs_copy(), 3, 1.0, list(budgets))
                for g in generations]

    def convs_copy() -> dict[str, list[dict]]:
        return {s: list(m) for s, m in convs.items()}

    monkeypatch.setattr(HFPolicy, "_forward", counted)
    padded = replies(HFPolicy(model, tokenizer, max_batch=6))
    assert prefills[0][0] == 5  # one slab of the 5 distinct prompts, outside an evaluation
    monkeypatch.setattr(hf, "prefill_groups", lambda spans, *_: [[0, 4], [1], [2, 3]] if len(spans) == 5 else
                        [[0, 2, 4], [1, 3, 5]])
    prefills.clear()
    policy = HFPolicy(model, tokenizer, max_batch=2)
    with policy.evaluation(6):
        grouped = replies(policy)
    assert (policy.max_batch, policy.bucket_prefill) == (2, False)
    assert [rows for rows, _ in prefills[:3]] == [2, 1, 2]  # the first turn's groups, each alone (one slice)
    assert [tokens for tokens, _ in grouped] == [tokens for tokens, _ in padded]
    for (_, mine), (_, theirs) in zip(grouped, padded):
        assert mine == pytest.approx(theirs, abs=1e-5)
    assert len({tuple(tokens) for tokens, _ in grouped}) > 6  # sampled replies that differ
    assert grouped[3][0] != grouped[5][0]  # the twins sampled their own replies from the shared prefill
    policy = HFPolicy(model, tokenizer)
    with policy.evaluation(6):  # one token a reply: the turns run no decode forward after the groups' prefill
        single = replies(policy, (1,) * 6)
    assert [tokens for tokens, _ in single] == [tokens for tokens, _ in replies(HFPolicy(model, tokenizer), (1,) * 6)]


def test_prefill_groups_split_far_lengths_and_keep_close_ones_together(organism) -> None:
    model, _ = organism
    shape = HFPolicy(model, organism[1]).shape
    spans = [(0, 400), (0, 12), (0, 410), (0, 10), (0, 11), (0, 405)]
    assert prefill_groups(spans, shape, 8192) == [[1, 3, 4], [0, 2, 5]]  # shortest first
    assert prefill_groups([(0, 10), (0, 11), (0, 12)], shape, 8192) == [[0, 1, 2]]  # padding cheaper than a forward
    assert sorted(i for group in prefill_groups([(c, n) for n in range(1, 60, 7) for c in (0, 500)], shape, 64)
                  for i in group) == list(range(18))


def test_divergent_history_restarts_the_session(organism) -> None:
    model, tokenizer = organism
    policy = HFPolicy(model, tokenizer)
    messages = conversations(1)["ep-0"]
    first = policy.generate([ChatRequest("ep-0", messages, [CLICK], max_tokens=4, temperature=0.0)])[0]
    kept = messages + [assistant_message(first), {"role": "tool", "content": "ok"}]
    policy.generate([ChatRequest("ep-0", kept, [CLICK], max_tokens=4, temperature=0.0)])
    stream = policy._sessions["ep-0"].input_ids
    assert stream[first.prompt_tokens : first.prompt_tokens + first.completion_tokens] == first.token_ids
    assert policy._sessions["ep-0"].loss_mask.count(1) == 8
    edited = [{"role": "system", "content": "Another system prompt."}] + kept[1:]
    policy.generate([ChatRequest("ep-0", edited, [CLICK], max_tokens=4, temperature=0.0)])
    session = policy._sessions["ep-0"]
    fresh = tokenizer(render_messages(edited, [CLICK]), add_special_tokens=False)["input_ids"]
    assert session.input_ids[: len(fresh)] == fresh
    assert session.loss_mask.count(1) == 4


def test_length_stop_closes_the_assistant_turn(organism) -> None:
    model, tokenizer = organism
    policy = HFPolicy(model, tokenizer, stop_token_ids=[])
    messages = conversations(1)["ep-0"]
    first = policy.generate([ChatRequest("ep-0", messages, [], max_tokens=3, temperature=0.0)])[0]
    assert first.finish_reason == "length" and first.completion_tokens == 3
    follow = messages + [assistant_message(first), {"role": "user", "content": "go on"}]
    second = policy.generate([ChatRequest("ep-0", follow, [], max_tokens=2, temperature=0.0)])[0]
    stream = policy._sessions["ep-0"].input_ids
    after_reply = stream[first.prompt_tokens + 3 :]
    assert tokenizer.decode(after_reply[:2], skip_special_tokens=False) == f"{IM_END}\n"
    assert second.prompt_tokens == len(stream) - 2


def test_a_full_context_changes_no_session_of_the_batch(organism) -> None:
    model, tokenizer = organism
    policy = HFPolicy(model, tokenizer)
    chats = conversations(2)
    replies = policy.generate([ChatRequest(k, m, [CLICK], max_tokens=4, temperature=0.0) for k, m in chats.items()])
    streams = {k: list(policy._sessions[k].input_ids) for k in chats}
    follow = {k: m + [assistant_message(r), {"role": "tool", "content": "ok " * 20}]
              for (k, m), r in zip(chats.items(), replies)}
    policy.max_position = len(streams["ep-1"]) + 8  # ep-1's next prompt no longer leaves room for a reply
    with pytest.raises(ContextFull, match="session ep-1: .* no room below max_position_embeddings"):
        policy.generate([ChatRequest(k, m, [CLICK], max_tokens=4, temperature=0.0) for k, m in follow.items()])
    assert {k: policy._sessions[k].input_ids for k in chats} == streams  # both streams end at their replies
    policy.max_position = 1 << 30
    alone = policy.generate([ChatRequest("ep-0", follow["ep-0"], [CLICK], max_tokens=4, temperature=0.0)])[0]
    assert alone.prompt_tokens > len(streams["ep-0"])  # the other session continues its stream


def test_a_failed_turn_is_rolled_back_and_its_retry_continues_the_stream(organism, monkeypatch, caplog) -> None:
    """A turn that fails after its rows were opened and one reply finished leaves every session as before it
    (a new one gone): retried, the sessions continue their streams, and the whole episode's token stream is the
    one a policy that never failed samples."""
    model, tokenizer = organism
    chats = conversations(3)
    first = {k: m for k, m in chats.items() if k != "ep-2"}  # ep-2 opens in the failing turn
    reference, failing = HFPolicy(model, tokenizer), HFPolicy(model, tokenizer)
    requests = [ChatRequest(k, m, [CLICK], max_tokens=4, temperature=1.0, seed=7) for k, m in first.items()]
    replies = reference.generate(requests)
    assert [r.text for r in failing.generate(requests)] == [r.text for r in replies]
    follow = {**{k: m + [assistant_message(r), {"role": "tool", "content": "ok"}]
                 for (k, m), r in zip(first.items(), replies)}, "ep-2": chats["ep-2"]}
    second = [ChatRequest(k, m, [CLICK], max_tokens=4, temperature=1.0, seed=11) for k, m in follow.items()]
    streams = {k: (list(failing._sessions[k].input_ids), len(failing._sessions[k].history)) for k in first}
    finish, calls = failing._finish_row, []

    def fail_on_the_second_row(row):
        calls.append(row.request.session_id)
        if len(calls) == 2:
            raise RuntimeError("out of memory")
        return finish(row)

    monkeypatch.setattr(failing, "_finish_row", fail_on_the_second_row)
    with pytest.raises(RuntimeError, match="out of memory"):
        failing.generate(second)
    assert {k: (failing._sessions[k].input_ids, len(failing._sessions[k].history)) for k in first} == streams
    assert "ep-2" not in failing._sessions and all(failing._sessions[k].cache is None for k in first)
    monkeypatch.setattr(failing, "_finish_row", finish)
    with caplog.at_level("WARNING", logger="intraskill.policy.hf"):
        retried = [failing.generate([request])[0] for request in second]  # as the runtime isolates them
    assert "restarting" not in caplog.text
    assert [g.text for g in retried] == [g.text for g in reference.generate(second)]
    for key in follow:  # the same tokens; log-probs alike up to the float noise of batch shapes
        resumed, expected = failing.end_session(key), reference.end_session(key)
        assert (resumed.input_ids, resumed.loss_mask) == (expected.input_ids, expected.loss_mask)
        assert resumed.logprobs == pytest.approx(expected.logprobs, abs=1e-4)


def test_bad_requests_name_the_field(organism) -> None:
    model, tokenizer = organism
    policy = HFPolicy(model, tokenizer)
    messages = conversations(1)["ep-0"]
    with pytest.raises(ValueError, match="prefill_chunk_tokens"):
        HFPolicy(model, tokenizer, prefill_chunk_tokens=0)
    with pytest.raises(ValueError, match="same session_id"):
        policy.generate([ChatRequest("a", messages, [], 2), ChatRequest("a", messages, [], 2)])
    with pytest.raises(ValueError, match="max_tokens"):
        ChatRequest("a", messages, [], 0)
    with pytest.raises(ValueError, match="top_p"):
        ChatRequest("a", messages, [], 2, top_p=0.0)


def test_grouped_sdpa_equals_transformers_sdpa(organism) -> None:
    _, tokenizer = organism
    plain, grouped = build_organism(TINY, tokenizer), build_organism(TINY, tokenizer)
    assert plain.config._attn_implementation == "sdpa" and use_gqa_sdpa(grouped)
    assert grouped.config._attn_implementation == GQA_SDPA and not use_gqa_sdpa(grouped)
    ids = torch.randint(5, TINY.vocab_size, (2, 12), generator=torch.Generator().manual_seed(3))
    valid = torch.ones(2, 12, dtype=torch.bool)
    valid[0, :4] = False  # a left-padded row
    mask = additive_mask(valid, 12, torch.float32)
    outputs = [model(input_ids=ids, attention_mask=mask).logits for model in (plain, grouped)]
    torch.testing.assert_close(outputs[0], outputs[1])
    for model in (plain, grouped):  # training: the causal path without a mask, with gradients
        model(input_ids=ids).logits.logsumexp(-1).sum().backward()
    for a, b in zip(plain.parameters(), grouped.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    with torch.no_grad():
        generated = [model.generate(ids[1:], max_new_tokens=6, do_sample=False) for model in (plain, grouped)]
    assert torch.equal(*generated)
