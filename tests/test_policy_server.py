"""``serve-policy`` on 127.0.0.1 driven by ``OpenAIPolicy``; retries with backoff against a flaky server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import openai
import pytest
import torch
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from waiting import wait_until

from intraskill.chat.base import ChatRequest, ContextFull, ToolCall
from intraskill.chat.chatml import assistant_message, render_messages
from intraskill.policy.hf import HFPolicy
from intraskill.policy.openai_backend import OpenAIPolicy, context_exceeded
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer
from intraskill.policy.server import ServerConfig, create_app
from intraskill.shop.service import serve_in_thread

TINY = OrganismConfig(vocab_size=400, hidden_size=64, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=32,
                      intermediate_size=128, max_position=2048, seed=3)
CLICK = {"type": "function", "function": {"name": "click", "parameters": {
    "type": "object", "properties": {"value": {"type": "string", "enum": ["B012", "buy now"]}}, "required": ["value"]}}}
TARGET = '<tool_call>{"name":"click","arguments":{"value":"B012"}}</tool_call><|im_end|>'


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(app) -> Iterator[str]:
    """Run ``app`` in a thread on a free 127.0.0.1 port, ready once it accepts requests
    (:func:`~intraskill.shop.service.serve_in_thread`); yields the ``/v1`` base URL."""
    with serve_in_thread(app) as running:
        yield f"{running.base_url}/v1"


def conversation(i: int) -> list[dict]:
    return [{"role": "system", "content": "You shop."}, {"role": "user", "content": f"Shopping task: item {i}"}]


def training_streams(turns: int = 2) -> list[str]:
    """The exact streams the server renders for :func:`conversation` when every reply is ``TARGET``."""
    streams = []
    for i in range(3):
        messages = conversation(i)
        stream = render_messages(messages, [CLICK])
        for turn in range(turns):
            streams.append(stream)
            call = {"id": "call_0", "type": "function", "function": {"name": "click", "arguments": '{"value":"B012"}'}}
            messages = messages + [{"role": "assistant", "content": None, "tool_calls": [call]},
                                   {"role": "tool", "tool_call_id": "call_0", "content": f"Page {turn}"}]
            stream += TARGET + "\n" + render_messages(messages, [CLICK], start=len(messages) - 1)
    return streams


def teach(steps: int = 150) -> tuple:
    """A tiny organism trained for a few seconds to answer every assistant turn with one click call."""
    tokenizer = train_tokenizer(protocol_corpus() + [TARGET], TINY.vocab_size)
    model = build_organism(TINY, tokenizer).train()
    target = tokenizer(TARGET, add_special_tokens=False)["input_ids"]
    batch = [tokenizer(p, add_special_tokens=False)["input_ids"] + target for p in training_streams()]
    width = max(map(len, batch))
    ids = torch.tensor([row + [tokenizer.pad_token_id] * (width - len(row)) for row in batch])
    labels = torch.full_like(ids, -100)
    for row, seq in enumerate(batch):
        labels[row, len(seq) - len(target) : len(seq)] = torch.tensor(target)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = model(input_ids=ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval(), tokenizer, float(loss.detach())


@pytest.fixture(scope="module")
def taught():
    model, tokenizer, loss = teach()
    assert loss < 0.05
    return model, tokenizer


@pytest.fixture()
def served(taught):
    model, tokenizer = taught
    policy = HFPolicy(model, tokenizer)
    batches: list[int] = []
    generate = policy.generate

    def recording(requests):
        batches.append(len(requests))
        return generate(requests)

    policy.generate = recording  # type: ignore[method-assign]
    config = ServerConfig(model_name="organism-test", max_sessions=4, batch_window_s=0.1)
    with serving(create_app(policy, config)) as base_url:
        yield base_url, policy, batches


@pytest.mark.e2e
def test_models_endpoint_and_bad_requests(served) -> None:
    base_url, _, _ = served
    client = openai.OpenAI(base_url=base_url, api_key="x")
    assert [m.id for m in client.models.list()] == ["organism-test"]
    with pytest.raises(openai.BadRequestError, match="stream"):
        client.chat.completions.create(model="organism-test", messages=conversation(0), stream=True)
    reply = httpx.post(f"{base_url}/chat/completions", json={"model": "m", "messages": [{"content": "hi"}]})
    assert reply.status_code == 400 and "messages[0]" in reply.json()["error"]["message"]


@pytest.mark.e2e
def test_openai_policy_plays_turns_with_tools_and_reuses_sessions(served) -> None:
    base_url, policy, batches = served
    remote = OpenAIPolicy(base_url, "organism-test", max_concurrency=8)
    conversations = [conversation(i) for i in range(3)]
    for turn in range(2):
        requests = [ChatRequest(f"ep-{i}", m, [CLICK], max_tokens=40, temperature=0.0) for i, m in enumerate(conversations)]
        generations = remote.generate(requests)
        for messages, generation in zip(conversations, generations):
            assert generation.tool_calls == [ToolCall("click", '{"value": "B012"}')]
            assert generation.content == "" and generation.finish_reason == "stop"
            assert generation.prompt_tokens > 0 and generation.completion_tokens > 5
            assert generation.token_ids is None and generation.logprobs is None
            messages.append(assistant_message(generation))
            messages.append({"role": "tool", "tool_call_id": "call_0", "content": f"Page {turn}"})
    assert remote.identity["backend"] == "openai"
    assert remote.end_session("ep-0") is None
    remote.close()
    # three concurrent requests per turn were micro-batched into lockstep calls
    assert max(batches) > 1 and sum(batches) == 6
    # the second turn continued each server session (KV cache reuse) instead of opening new ones
    assert len(policy.session_ids) == 3
    for session_id in policy.session_ids:
        assert policy.end_session(session_id).loss_mask.count(1) >= 2 * 10


@pytest.mark.e2e
def test_a_full_context_crosses_http_as_context_full(served) -> None:
    """serve-policy answers a prompt that leaves no room as OpenAI's ``context_length_exceeded``; the OpenAI
    backend reads it back as ContextFull (which the runtime scores as a ``generation_length`` terminal), as it
    reads vLLM's and SGLang's wording; any other 400 stays an error."""
    base_url, policy, _ = served
    messages = conversation(0)
    policy.max_position = 8  # no prompt fits below it
    reply = httpx.post(f"{base_url}/chat/completions", json={"model": "organism-test", "messages": messages})
    assert reply.status_code == 400 and reply.json()["error"]["code"] == "context_length_exceeded"
    remote = OpenAIPolicy(base_url, "organism-test")
    try:
        with pytest.raises(ContextFull, match="session ep-9: .* leave no room below max_position_embeddings=8"):
            remote.generate([ChatRequest("ep-9", messages, [CLICK], max_tokens=4, temperature=0.0)])
    finally:
        remote.close()
    response = httpx.Response(400, request=httpx.Request("POST", "http://127.0.0.1/v1/chat/completions"))
    for message, full in (("This model's maximum context length is 4096 tokens. However, you requested 5000", True),
                          ("The input (5000 tokens) is longer than the model's context length (4096 tokens).", True),
                          ("messages[0]: an object with a string 'role' is required", False)):
        assert context_exceeded(openai.BadRequestError(message, response=response, body=None)) is full


@pytest.mark.e2e
def test_lru_sessions_are_evicted(served) -> None:
    base_url, policy, _ = served
    client = openai.OpenAI(base_url=base_url, api_key="x")
    for i in range(6):
        reply = client.chat.completions.create(model="organism-test", messages=conversation(10 + i), max_tokens=2,
                                               temperature=0.0)
        assert reply.choices[0].finish_reason == "length"
        assert reply.usage.completion_tokens == 2
        assert reply.usage.total_tokens == reply.usage.prompt_tokens + 2
    assert len(policy.session_ids) == 4


def flaky_app(failures: int):
    """A chat-completions app that answers 500 ``failures`` times, then a tool call."""
    app = FastAPI()
    calls: list[float] = []

    @app.post("/v1/chat/completions")
    async def complete() -> JSONResponse:
        calls.append(time.monotonic())
        if len(calls) <= failures:
            return JSONResponse({"error": {"message": "warming up"}}, status_code=500)
        message = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "search", "arguments": json.dumps({"query": "mug"})}}]}
        return JSONResponse({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})

    return app, calls


def test_retries_with_backoff_after_a_server_error() -> None:
    app, calls = flaky_app(failures=1)
    with serving(app) as base_url:
        remote = OpenAIPolicy(base_url, "m", max_retries=2, backoff=0.2)
        [generation] = remote.generate([ChatRequest("ep", conversation(0), [CLICK], max_tokens=8)])
        remote.close()
    assert generation.tool_calls == [ToolCall("search", '{"query": "mug"}')]
    assert (generation.prompt_tokens, generation.completion_tokens) == (7, 3)
    assert len(calls) == 2 and calls[1] - calls[0] >= 0.2


def test_retries_are_bounded() -> None:
    app, calls = flaky_app(failures=5)
    with serving(app) as base_url:
        remote = OpenAIPolicy(base_url, "m", max_retries=1, backoff=0.01)
        with pytest.raises(openai.InternalServerError):
            remote.generate([ChatRequest("ep", conversation(0), [], max_tokens=8)])
        remote.close()
    assert len(calls) == 2


@pytest.mark.e2e
def test_serve_policy_command_serves_a_checkpoint(taught, tmp_path) -> None:
    model, tokenizer = taught
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    port = free_port()
    command = [sys.executable, "-m", "intraskill", "serve-policy", "--model", "organism", "--checkpoint",
               str(tmp_path), "--port", str(port), "--served-name", "org"]
    process = subprocess.Popen(command, env={**os.environ, "OMP_NUM_THREADS": "1"}, stderr=subprocess.PIPE)
    def healthy() -> bool:
        assert process.poll() is None, process.stderr.read().decode()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/healthz").status_code == 200
        except httpx.TransportError:
            return False

    try:
        wait_until(healthy, "serve-policy answers /healthz", timeout_s=120, every_s=0.25)
        health = httpx.get(f"http://127.0.0.1:{port}/healthz")
        assert health.json()["backend"] == "hf" and len(health.json()["checkpoint_id"]) == 64
        body = {"model": "org", "messages": conversation(1), "tools": [CLICK], "max_tokens": 40, "temperature": 0}
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60).json()
        assert reply["model"] == "org"
        assert reply["choices"][0]["finish_reason"] == "tool_calls"
        assert reply["choices"][0]["message"]["tool_calls"][0]["function"] == {
            "name": "click", "arguments": '{"value": "B012"}'}
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_serve_policy_refuses_an_organism_without_a_matching_warm_start(tmp_path) -> None:
    from typer.testing import CliRunner

    from intraskill.cli import app
    from intraskill.paths import params_path

    text = params_path("organism").read_text(encoding="utf-8")
    changed = tmp_path / "other.yaml"
    assert "\n  steps: 1400 " in text
    changed.write_text(text.replace("\n  steps: 1400 ", "\n  steps: 7 ", 1), encoding="utf-8")
    runner = CliRunner()
    refused = runner.invoke(app, ["serve-policy", "--model", "organism", "--params", str(changed)])
    assert refused.exit_code == 1
    assert "intraskill warmstart --params" in refused.output and "Traceback" not in refused.output
    untrained = runner.invoke(app, ["serve-policy", "--model", "smollm2", "--checkpoint", "untrained"])
    assert untrained.exit_code == 1 and "random-init organism" in untrained.output
