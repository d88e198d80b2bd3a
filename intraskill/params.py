"""Parameter sets (``params/*.yaml``) validated with pydantic before any work starts.

Unknown keys are errors (typos never pass silently) and every error names its field path,
e.g. ``grpo.eps_high: Input should be greater than 0``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ExperimentParams(_Section):
    """Run identity and where runs live."""

    name: str = Field(min_length=1)
    seed: int = 20260901
    run_root: str = "runs"


class StoreParams(_Section):
    """The store: catalogue scale and the reference protocol limits (20 / 150 / 30)."""

    scale: Literal["default", "small"] = "default"
    seed: int = 20260829
    page_size: int = Field(20, ge=1, le=20)
    top_k: int = Field(150, ge=1)
    max_actions: int = Field(30, ge=1)
    language: Literal["en", "zh"] = "en"


class OrganismParams(_Section):
    """Shape of the tiny Qwen3-architecture organism and its domain tokenizer."""

    vocab_size: int = Field(2048, ge=300)
    hidden_size: int = Field(256, ge=16)
    num_layers: int = Field(4, ge=1)
    num_heads: int = Field(4, ge=1)
    num_kv_heads: int = Field(2, ge=1)
    intermediate_size: int = Field(768, ge=16)
    max_position: int = Field(4096, ge=256)

    @model_validator(mode="after")
    def _heads_divide(self) -> "OrganismParams":
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size ({self.hidden_size}) must be divisible by num_heads ({self.num_heads})")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads ({self.num_heads}) must be divisible by num_kv_heads ({self.num_kv_heads})")
        return self


class ModelParams(_Section):
    """Which policy: ``organism``, ``smollm2``, a local HF directory, or ``openai:<base_url>#<model>``."""

    spec: str = "organism"
    checkpoint: str | None = None
    device: Literal["cpu", "cuda", "auto"] = "auto"
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    organism: OrganismParams = OrganismParams()


class SamplingParams(_Section):
    """Decoding and the episode budget (reference: temperature 0.6, top_p 1.0, 30 turns)."""

    temperature: float = Field(0.6, ge=0.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    max_tokens_per_turn: int = Field(4096, ge=1)
    max_turns: int = Field(30, ge=1)


class EvaluationParams(_Section):
    """Evaluation runs: repeats per task and the paired bootstrap."""

    repeats: int = Field(1, ge=1)
    task_limit: int | None = Field(None, ge=1)
    bootstrap_samples: int = Field(10_000, ge=100)
    bootstrap_seed: int = 20260901


class Params(_Section):
    """One experiment's full parameter set."""

    experiment: ExperimentParams
    store: StoreParams = StoreParams()
    model: ModelParams = ModelParams()
    sampling: SamplingParams = SamplingParams()
    evaluation: EvaluationParams = EvaluationParams()


class ParamsError(ValueError):
    """A parameter file failed validation; the message lists each bad field path."""


def _format_errors(source: str, error: ValidationError) -> str:
    lines = [f"invalid parameters in {source}:"]
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "<root>"
        lines.append(f"  {where}: {item['msg']}")
    return "\n".join(lines)


def load_params(path: str | Path) -> Params:
    """Read and validate a YAML parameter file; raise :class:`ParamsError` naming bad fields."""
    path = Path(path)
    if not path.exists():
        raise ParamsError(f"parameter file not found: {path}")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    return params_from_dict(data, source=str(path))


def params_from_dict(data: dict, source: str = "<dict>") -> Params:
    """Validate a parameter mapping (used by notebooks for their injected overrides)."""
    try:
        return Params.model_validate(data)
    except ValidationError as error:
        raise ParamsError(_format_errors(source, error)) from None
