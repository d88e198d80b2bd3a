"""The organism: a tiny Qwen3-architecture model with a domain byte-level BPE tokenizer.

Sizing follows ``organism-feasibility.md``: the LM head dominates a tiny model's cost, so the
vocabulary is small (a few thousand tokens trained on the catalogue and protocol text), and digits
are split into single-digit tokens (``Digits(individual_digits=True)``), which is what makes
copying product ids learnable in minutes; a word carries its leading space (GPT-2's split), so the
task's words reappear as the same tokens in the query.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.agent.prompts import PERSONA_LABELS, TASK_LABELS, system_prompt
from intraskill.agent.protocol import ProtocolErrorCode
from intraskill.agent.tools import build_tools
from intraskill.chat.chatml import (
    ASSISTANT_PROMPT,
    END_OF_TEXT,
    IM_END,
    IM_START,
    SPECIAL_TOKENS,
    TOOL_INSTRUCTIONS,
    render_tool_call,
    render_tools_block,
)
from intraskill.params import OrganismParams
from intraskill.shop.observation import NAVIGATION_LABELS, PAGE_LABELS

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM


_SHAPE = OrganismParams()
"""The organism's shape defaults, written once in :class:`~intraskill.params.OrganismParams`."""


@dataclass(frozen=True)
class OrganismConfig:
    """Shape of the organism (a Qwen3 decoder with tied embeddings).

    What it adds to ``model.organism`` (:class:`~intraskill.params.OrganismParams`, whose defaults it takes): the
    settings the parameter files leave fixed (head size, RoPE base, initialisation) and the initialisation seed,
    recorded with the checkpoint (:meth:`to_dict`).

    Parameters
    ----------
    vocab_size
        Target BPE vocabulary including the special tokens (feasibility note: 2–4k).
    hidden_size, num_layers, num_heads, num_kv_heads, head_dim, intermediate_size
        Transformer shape; the defaults are the shipped organism's (``params/organism.yaml``: h256,
        2 layers, 2.1 M parameters with a 2k vocabulary).
    max_position
        Longest token stream an episode may reach.
    rope_theta
        RoPE base.
    initializer_range
        Standard deviation of the random initialisation.
    seed
        Seed of the random initialisation (used inside a forked RNG, never globally).
    """

    vocab_size: int = _SHAPE.vocab_size
    hidden_size: int = _SHAPE.hidden_size
    num_layers: int = _SHAPE.num_layers
    num_heads: int = _SHAPE.num_heads
    num_kv_heads: int = _SHAPE.num_kv_heads
    head_dim: int = 64
    intermediate_size: int = _SHAPE.intermediate_size
    max_position: int = _SHAPE.max_position
    rope_theta: float = 10000.0
    initializer_range: float = 0.02
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim"):
            if getattr(self, name) < 1:
                raise ValueError(f"OrganismConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"OrganismConfig.num_heads ({self.num_heads}) must be a multiple of num_kv_heads "
                f"({self.num_kv_heads})"
            )
        if self.vocab_size < 256 + len(SPECIAL_TOKENS):
            raise ValueError(f"OrganismConfig.vocab_size must cover the 256 byte symbols, got {self.vocab_size}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def protocol_corpus() -> list[str]:
    """Protocol text for tokenizer training: role markers, tool-call skeletons, prompts, page labels, digits.

    Page labels, the system prompt, the task/persona labels, the tools and the protocol error codes
    come from the store and the agent runtime (English), so the tokenizer has merges for them.
    """
    tools = build_tools({"search_available": True, "actions": [*NAVIGATION_LABELS, "color=red", "B0123456789"]})
    texts = [
        f"{IM_START}system\n{system_prompt('en')}\n\n{TOOL_INSTRUCTIONS}{IM_END}\n",
        f"{IM_START}user\n{TASK_LABELS['en']}\n{render_tools_block(tools)}{IM_END}\n",
        f"{IM_START}tool\n{IM_END}\n{ASSISTANT_PROMPT}",
        PERSONA_LABELS["en"],
        render_tool_call("search", {"query": "red ceramic coffee mug"}) + IM_END,
    ]
    for value in (*NAVIGATION_LABELS, "B0123456789", "color=red", "size=x-large"):
        texts.append(render_tool_call("click", {"value": value}) + IM_END)
    texts.extend(PAGE_LABELS["en"].values())
    texts.extend(code.value for code in ProtocolErrorCode)
    texts.append(" ".join(str(digit) for digit in range(10)) + " 12.99 to 45.50")
    return texts


def _pre_tokenizer() -> Any:
    # deferred: tokenizers is heavy to import
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])


def organism_split() -> dict[str, Any]:
    """How :func:`train_tokenizer` splits text before BPE, as ``tokenizer.json`` records it.

    Part of a warm start's identity: a checkpoint whose tokenizer splits otherwise is never reused.
    """
    # deferred: tokenizers is heavy to import
    from tokenizers import Tokenizer, models

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _pre_tokenizer()
    return json.loads(tokenizer.to_str())["pre_tokenizer"]


def splits_like_organism(tokenizer_json: str | Path) -> bool:
    """Whether the saved ``tokenizer.json`` splits text as :func:`train_tokenizer` does now."""
    path = Path(tokenizer_json)
    if not path.is_file():
        return False
    return json.loads(path.read_text(encoding="utf-8")).get("pre_tokenizer") == organism_split()


def train_tokenizer(texts: Iterable[str], vocab_size: int, path: str | Path | None = None) -> PreTrainedTokenizerFast:
    """Train a deterministic byte-level BPE tokenizer with single-digit tokens.

    Words keep their leading space (GPT-2's pre-tokenizer rule), so the instruction's ``Ġfamily Ġchess
    Ġset`` reappear as the same tokens in the query: copying a phrase is then a one-step induction
    (find the current token earlier, emit the token that followed it). Isolated spaces would make it
    a two-step one (``family Ġ chess``), which the organism did not learn in CPU budgets
    (:mod:`intraskill.organism.drills`).

    Parameters
    ----------
    texts
        Training corpus (catalogue text plus :func:`protocol_corpus`).
    vocab_size
        Target vocabulary size, special tokens included.
    path
        If given, the tokenizer is written there with ``save_pretrained``.

    Returns
    -------
    PreTrainedTokenizerFast
        With ``<|endoftext|>`` as eos/pad and the ChatML/tool-call markers as special tokens.
    """
    # deferred: tokenizers is heavy to import
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    # deferred: transformers is heavy to import
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = _pre_tokenizer()
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(list(texts), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=END_OF_TEXT,
        pad_token=END_OF_TEXT,
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t != END_OF_TEXT],
    )
    if path is not None:
        fast.save_pretrained(str(path))
    return fast


def build_organism(config: OrganismConfig, tokenizer: PreTrainedTokenizerFast) -> Qwen3ForCausalLM:
    """A randomly initialised Qwen3 causal LM sized by ``config``, with vocabulary ``len(tokenizer)``.

    Initialisation draws from a forked RNG seeded with ``config.seed``; global RNG state is untouched.
    """
    # deferred: torch is heavy to import
    import torch

    # deferred: transformers is heavy to import
    from transformers import Qwen3Config, Qwen3ForCausalLM

    eos_id = tokenizer.convert_tokens_to_ids(END_OF_TEXT)
    im_end_id = tokenizer.convert_tokens_to_ids(IM_END)
    model_config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        head_dim=config.head_dim,
        max_position_embeddings=config.max_position,
        rope_parameters={"rope_type": "default", "rope_theta": config.rope_theta},
        tie_word_embeddings=True,
        initializer_range=config.initializer_range,
        bos_token_id=None,
        eos_token_id=[im_end_id, eos_id],
        pad_token_id=eos_id,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = Qwen3ForCausalLM(model_config)
    model.generation_config.eos_token_id = [im_end_id, eos_id]
    model.generation_config.pad_token_id = eos_id
    return model.eval()
