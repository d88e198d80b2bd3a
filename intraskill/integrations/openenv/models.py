"""The store's OpenEnv wire types: what an agent sends (:class:`ShopAction`), sees (:class:`ShopObservation`)
and may inspect (:class:`ShopState`), as pydantic models on OpenEnv's base classes.

An observation carries the page (text and ``observation_state``), the canonical actions available on it
and the feedback of the last action; the task (instruction, persona, skill context) comes with the reset
observation only; the reward parts, the purchase and the private goal come with the terminal one only.
"""

from __future__ import annotations

from typing import Any, Literal

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from intraskill.shop.engine import EXTERNAL_TERMINATIONS


class ShopAction(Action):
    """One canonical store action (``search[...]`` / ``click[...]``), or a zero-reward ``terminate``."""

    action: str | None = Field(None, min_length=1, pattern=r"\S",
                               description="The action text, e.g. 'search[red mug]' or 'click[buy now]'.")
    terminate: Literal[EXTERNAL_TERMINATIONS] | None = Field(  # type: ignore[valid-type]
        None, description="End the episode with reward 0 for this reason instead of acting.")

    @model_validator(mode="after")
    def _one_of(self) -> ShopAction:
        if (self.action is None) == (self.terminate is None):
            # a custom error carries no exception object, so the error list serialises as JSON (HTTP and /ws)
            raise PydanticCustomError("one_of", "action, terminate: give exactly one")
        return self


class ShopObservation(Observation):
    """One page as the agent sees it (``done`` and ``reward`` are OpenEnv's base fields)."""

    page: str = Field("", description="The page as text (the engine's ``observation``).")
    page_state: dict[str, Any] = Field(default_factory=dict,
                                       description="The structured page (the engine's ``observation_state``).")
    available_actions: list[str] = Field(default_factory=list,
                                         description="Canonical actions of this page: 'search[...]', 'click[label]'.")
    feedback: dict[str, Any] = Field(default_factory=dict,
                                     description="The last action's record: action, valid, reason, message.")
    message: str = Field("", description="The engine's status line.")
    task_id: int | None = Field(None, description="The episode's task.")
    instruction: str | None = Field(None, description="The task as the agent reads it (reset only).")
    user_persona: dict[str, Any] | None = Field(None, description="The public persona (reset only).")
    task_mode: str | None = Field(None, description="persona or standard (reset only).")
    skill_context: str | None = Field(None, description="The rendered skill block for the prompt (reset only; "
                                                        "empty without skills).")
    reward_detail: dict[str, Any] | None = Field(None, description="The reward parts (terminal only).")
    termination_reason: str | None = Field(None, description="purchase, action_limit or generation_length.")
    purchase: dict[str, Any] | None = Field(None, description="The bought item (terminal purchase only).")
    goal: dict[str, Any] | None = Field(None, description="The private goal, revealed at the end (terminal only) "
                                                         "by a server in trusted mode (--reveal-goal); else null.")


class ShopState(State):
    """The session's episode bookkeeping (``episode_id`` and ``step_count`` are OpenEnv's base fields);
    it never holds the goal."""

    task_id: int | None = None
    split: str | None = None
    seed: int | None = Field(None, description="The seed a task was drawn with (when reset drew one).")
    task_mode: str | None = None
    skill_ids: list[str] = Field(default_factory=list)
    max_actions: int = 0
    store_config: dict[str, Any] = Field(default_factory=dict, description="The served store's settings "
                                         "(intraskill.shop.engine.StoreConfig: page_size, top_k, max_actions, ...).")
    done: bool = False
    termination_reason: str | None = None
