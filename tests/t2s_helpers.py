"""Trace2Skill test helpers: real failed full-skill retries (the scripted expert with a competence off), a
scripted OpenAI-compatible server, and a model that answers the LLM roles as messily as a small real one."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request

from intraskill.agent.env import InProcessEnvironment
from intraskill.agent.runtime import EpisodeJob, RuntimeConfig, run_episodes
from intraskill.policy.expert_policy import ExpertPolicy
from intraskill.policy.openai_backend import OpenAIPolicy
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import Competences, ScriptedExpert, run_expert_episode
from intraskill.shop.service import serve_in_thread
from intraskill.skills.bank import Skill, SkillBank
from intraskill.skills.render import render_chunk
from intraskill.trace2skill.mechanisms import MECHANISMS
from intraskill.trace2skill.queue import AnalysisItem

OPTION_CHUNK = Skill("chunk-options", "### Options\n\n- Applies when: a product page\n- Procedure:\n  1. pick\n"
                     "- Verify: all axes\n- Avoid: guessing", version="active-1",
                     metadata={"mechanism": "option_selection", "estimated_effect": 0.01})
QUERY_CHUNK = Skill("chunk-query", render_chunk(MECHANISMS["query_formulation"].chunk), version="active-1",
                    metadata={"competence": "read_persona", "estimated_effect": 0.02})
BANK = SkillBank("organism-test-s0", (QUERY_CHUNK, OPTION_CHUNK))


def failed_retries(engine: ShopEngine, task_ids: list[int], without: str, bank: SkillBank = BANK,
                   limit: int = 4) -> list[AnalysisItem]:
    """Play the expert without ``without`` as full-skill retries (all bank chunks injected); the failures."""
    jobs = [EpisodeJob.create(task_id, 8, seed=3, skills=bank.enabled_skills()) for task_id in task_ids]
    results = run_episodes(ExpertPolicy(Competences().without(without)), lambda: InProcessEnvironment(engine),
                           jobs, RuntimeConfig(), progress=False)
    items = []
    for index, result in enumerate(results):
        if result.scored and result.reward.r_success == 0:
            episode = f"train-group-{index:09d}-sample-000000008-full-skill-retry"
            result.trace.episode_id = episode
            items.append(AnalysisItem(episode, index, result.task_id, "train", True, result.trace))
    return items[:limit]


Reply = dict[str, Any] | str
"""A scripted reply: plain text, or one tool call ``{"name", "arguments"}`` (arguments as an object, or as raw
text for malformed JSON)."""


class ScriptedServer:
    """A real HTTP chat-completions server that answers with scripted replies (then with ``answer`` of the
    request body, when given) and records requests."""

    def __init__(self, answer: Callable[[dict[str, Any]], Reply] | None = None) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.answer = answer
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> dict[str, Any]:
            body = await request.json()
            self.requests.append(body)
            if self.replies:
                reply = self.replies.pop(0)
            else:
                reply = self.answer(body) if self.answer is not None else "nothing left to say"
            message: dict[str, Any] = {"role": "assistant", "content": reply if isinstance(reply, str) else None}
            if not isinstance(reply, str):
                arguments = reply["arguments"]
                message["tool_calls"] = [{"id": "call_0", "type": "function", "function": {
                    "name": reply["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments)}}]
            return {"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "scripted",
                    "choices": [{"index": 0, "message": message, "logprobs": None,
                                 "finish_reason": "stop" if isinstance(reply, str) else "tool_calls"}],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

        self.app = app

    def script(self, *replies: Reply) -> None:
        self.replies, self.requests = list(replies), []

    def tools(self, index: int) -> list[str]:
        return [tool["function"]["name"] for tool in self.requests[index].get("tools") or []]



@contextmanager
def scripted_analyst() -> Iterator[tuple[ScriptedServer, OpenAIPolicy]]:
    """A :class:`ScriptedServer` on 127.0.0.1 and an OpenAI-protocol policy talking to it (no retries)."""
    scripted = ScriptedServer()
    with serve_in_thread(scripted.app) as running:
        policy = OpenAIPolicy(f"{running.base_url}/v1", "scripted", max_retries=0)
        yield scripted, policy
        policy.close()


def card_arguments(content: str, mechanism: str = "option_selection") -> dict[str, Any]:
    """``submit_failure_card`` arguments of an ADD card proposing ``content``."""
    known = MECHANISMS[mechanism]
    audit = ("gold_asin", "chosen_asin", "failure_surface", "earliest_divergence", "oracle_comparison",
             "replay_evidence", "minimal_repair", "repair_validation_result")
    return {"status": "PROPOSE_ADD", "privileged_audit": {k: "x" for k in audit},
            "deployable_abstraction": {"failure_mechanism": mechanism,
                                       "applicable_when": known.chunk.applicable_when,
                                       "observable_trigger": known.observable_trigger,
                                       "corrective_procedure": "; ".join(known.chunk.procedure),
                                       "verification_step": known.chunk.verification,
                                       "target_chunk_id": None, "proposed_content": content}}


class MessyModel:
    """Answers the failure analyst and the online compiler like a small real model, as an ``answer`` hook.

    The analyst plays the full expert's winning actions of the task it is shown (a successful
    counterfactual), then submits: malformed call arguments (``invalid_json``), a card wrapped in prose
    under a wrong key (``invalid_fields``), and finally the card in prose (repaired); the first card it
    submits names the gold product (downgraded by the firewall). The compiler first submits, in prose,
    a candidate naming a gold product (``gold_leak``), then a clean one in a code fence as
    ``{"name", "arguments"}`` (repaired).
    """

    def __init__(self, engine: ShopEngine) -> None:
        self.engine = engine
        self.gold_names: list[str] = []
        self.cards = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        tools = [tool["function"]["name"] for tool in body.get("tools") or []]
        opening = json.loads(body["messages"][1]["content"])
        if tools == ["submit_online_candidates"]:
            return self._compile(opening, body["messages"])
        gold = opening["failed_trace_and_privileged_gold"]["privileged_gold_audit"]["goal"]["name"]
        if tools != ["submit_failure_card"]:  # a live turn
            calls = self._winning_calls(opening["fresh_live_session"])
            turn = sum(m["role"] == "assistant" for m in body["messages"])
            if turn < len(calls):
                return calls[turn]
            return {"name": "submit_failure_card", "arguments": '{"status": "PROPOSE_ADD", "privileged_audit": {'}
        last = body["messages"][-1]
        content = MECHANISMS["option_selection"].content
        if "not valid JSON" in json.loads(last["content"])["repair"]["error"]:
            return f"Here is my failure card:\n{json.dumps({'card': card_arguments(content)})}\nThanks."
        self.gold_names.append(gold)
        if not self.cards:
            content += f"\n\nWhen unsure, buy {gold}."
        self.cards += 1
        return f"Sorry. The corrected card:\n```json\n{json.dumps(card_arguments(content))}\n```"

    def _winning_calls(self, live: dict[str, Any]) -> list[dict[str, Any]]:
        """The full expert's actions on the task whose public view ``live`` shows, as tool calls."""
        task_id = next(t for t, goal in self.engine.goals.items()
                       if live["task_instruction"] in (goal.public_task().instruction_simple, goal.instruction_text)
                       and live["user_persona"] in (goal.public_task().user_persona, {}))
        actions: list[str] = []
        run_expert_episode(self.engine.new_session(), ScriptedExpert(Competences()),
                           self.engine.goals[task_id].public_task(), lambda action, _: actions.append(action))
        return [dict(zip(("name", "arguments"), ScriptedExpert.tool_call(a))) for a in actions]

    def _compile(self, compiler_input: dict[str, Any], messages: list[dict[str, Any]]) -> str:
        chunk = MECHANISMS["option_selection"].chunk
        candidate = {"operation": "ADD", "target_chunk_id": None, "title": "Select every option axis",
                     "failure_mechanism": "option_selection", "applicable_when": chunk.applicable_when,
                     "procedure": list(chunk.procedure), "verification": chunk.verification,
                     "common_failure": "buying with an option axis left at its default",
                     "evidence_card_ids": [c["card_id"] for c in compiler_input["failure_cards"]]}
        if len(messages) == 2:  # the first attempt; a repair adds a message
            leaking = {**candidate, "procedure": [*chunk.procedure, f"Prefer {self.gold_names[0]}."]}
            return f"I propose: {json.dumps({'candidates': [leaking], 'evidence_only_card_ids': []})}"
        call = {"name": "submit_online_candidates",
                "arguments": {"candidates": [candidate], "evidence_only_card_ids": []}}
        return f"```json\n{json.dumps(call)}\n```"
