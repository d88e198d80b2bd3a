"""The shopping agent: prompts, per-turn tools, protocol errors, the lockstep runtime and traces."""

from intraskill.agent.env import Environment, InProcessEnvironment
from intraskill.agent.prompts import (
    PROMPT_VERSION,
    build_first_user_message,
    build_system_message,
    prompt_identity,
)
from intraskill.agent.protocol import ProtocolErrorCode, TurnDecision, interpret_generation
from intraskill.agent.runtime import (
    EpisodeJob,
    EpisodeResult,
    RuntimeConfig,
    episode_id,
    episode_seed,
    run_episodes,
)
from intraskill.agent.tools import build_tools
from intraskill.agent.traces import (
    TRACE_SCHEMA_VERSION,
    EpisodeStatus,
    EpisodeTrace,
    TurnRecord,
    read_traces,
    reward_from_terminal,
    scan_prompts_for_gold,
)

__all__ = [
    "PROMPT_VERSION",
    "TRACE_SCHEMA_VERSION",
    "Environment",
    "EpisodeJob",
    "EpisodeResult",
    "EpisodeStatus",
    "EpisodeTrace",
    "InProcessEnvironment",
    "ProtocolErrorCode",
    "RuntimeConfig",
    "TurnDecision",
    "TurnRecord",
    "build_first_user_message",
    "build_system_message",
    "build_tools",
    "episode_id",
    "episode_seed",
    "interpret_generation",
    "prompt_identity",
    "read_traces",
    "reward_from_terminal",
    "run_episodes",
    "scan_prompts_for_gold",
]
