"""The GRPO trainer step for in-process (``hf``) policies.

:class:`GRPOTrainer` only orchestrates; the objective lives in :mod:`intraskill.training.loss`, the
advantages in :mod:`intraskill.training.advantages` and batching in :mod:`intraskill.training.batching`.
One :meth:`GRPOTrainer.train_step` consumes one rollout step's admitted samples: it splits them by
whole groups into optimizer updates of ``global_batch_size`` episodes, packs each update into
micro-batches under a token budget, accumulates gradients so that the update's loss is one token
mean over all its model-generated tokens, clips the gradient norm and takes one AdamW step per
update. The trainer takes the ``grpo`` section itself (:class:`~intraskill.params.GRPOParams`, whose defaults
are the release's, ``docs/method.md`` §6.3) and the sampling temperature.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from intraskill.params import GRPOParams, LoraParams, SamplingParams
from intraskill.phases import add_work, phase, recording
from intraskill.policy.flops import TransformerShape
from intraskill.training.batching import (
    MicroBatch,
    TrainSample,
    collate,
    pack_micro_batches,
    padding_waste,
    sample_weighting,
    split_updates,
)
from intraskill.training.loss import (
    ScoredTokens,
    clipped_surrogate,
    k3_kl,
    masked_sum_mean,
    scored_tokens,
    token_entropy,
    token_logprobs,
)

if TYPE_CHECKING:
    import torch

class NonFiniteUpdateError(ValueError):
    """An update's loss, gradient norm or resulting weights are not finite: training stops before any
    checkpoint holds them."""
ADAM_EPS = 1e-8
"""AdamW's epsilon (PyTorch's default; the release does not set it)."""
DEFAULT_TEMPERATURE = SamplingParams.model_fields["temperature"].default
"""The rollouts' sampling temperature when a trainer is given none (``sampling.temperature``'s default)."""


@dataclass
class StepMetrics:
    """Diagnostics of one :meth:`GRPOTrainer.train_step`.

    Loss terms and diagnostics are token means over all model-generated tokens of the step
    (``kl_ref`` is ``None`` without a reference). ``approx_kl`` is old-vs-new (``mean(logp_old -
    logp_new)``), ``clipfrac`` the share of tokens whose clipped branch is active, ``entropy`` the
    mean next-token entropy (nats) at the training temperature. ``grad_norm`` is the mean pre-clip
    norm over updates; ``padding_waste`` = 1 - real / padded tokens; ``tokens_per_s`` counts real
    (unpadded) tokens through forward and backward.
    """

    loss: float
    pg_loss: float
    clipfrac: float
    approx_kl: float
    entropy: float
    kl_ref: float | None
    grad_norm: float
    updates: int
    micro_batches: int
    samples: int
    episodes: int
    groups: int
    model_tokens: int
    real_tokens: int
    padded_tokens: int
    padding_waste: float
    duration_s: float
    tokens_per_s: float
    lr: float
    grad_norms: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class UpdateTotals:
    """Diagnostics of one update (token means over its mask tokens) and its token counts.

    :meth:`add` folds an update into step totals weighted by its mask tokens; :meth:`mean` reads a
    token mean back.
    """

    loss: float = 0.0
    pg_loss: float = 0.0
    clipfrac: float = 0.0
    approx_kl: float = 0.0
    entropy: float = 0.0
    kl_ref: float = 0.0
    micro_batches: int = 0
    model_tokens: int = 0
    real_tokens: int = 0
    padded_tokens: int = 0

    def add(self, other: UpdateTotals) -> None:
        for name in ("loss", "pg_loss", "clipfrac", "approx_kl", "entropy", "kl_ref"):
            setattr(self, name, getattr(self, name) + getattr(other, name) * other.model_tokens)
        for name in ("micro_batches", "model_tokens", "real_tokens", "padded_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def mean(self, name: str) -> float:
        return getattr(self, name) / max(self.model_tokens, 1)


def apply_lora(model: torch.nn.Module, settings: LoraParams) -> torch.nn.Module:
    """Wrap ``model`` with peft LoRA adapters; base weights are frozen."""
    # deferred: peft is heavy to import
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=settings.rank,
        lora_alpha=settings.alpha,
        lora_dropout=settings.dropout,
        target_modules=list(settings.target_modules),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


class GRPOTrainer:
    """GRPO updates of a causal LM on recorded rollout tokens.

    Parameters
    ----------
    model
        A transformers causal LM (its decoder ``get_decoder()`` and LM head ``get_output_embeddings()``); wrapped
        with LoRA adapters when ``grpo.lora`` is set (then :attr:`model` is the peft model).
    grpo
        The update's settings, :class:`~intraskill.params.GRPOParams` (clip range, k3 KL weight, AdamW with a
        constant learning rate and weight decay on matrices only, as in Megatron; gradient clip, ``None`` = off,
        the norm still reported; episodes per update, ``None`` = one update per step; padded-token budget of one
        micro-batch, which must cover the longest sample; autocast; LoRA). With ``kl_coef > 0`` pass
        ``ref_model`` or use LoRA (the frozen base is then the reference).
    temperature
        The rollouts' sampling temperature (``sampling.temperature``): log-probs are recomputed at it, so it must
        be > 0.
    pad_token_id
        Id written into padding positions (never attended, never trained).
    ref_model
        Frozen reference for the k3 KL term and the ``kl_ref`` diagnostic; optional.
    """

    def __init__(self, model: torch.nn.Module, grpo: GRPOParams = GRPOParams(), *,
                 temperature: float = DEFAULT_TEMPERATURE, pad_token_id: int = 0,
                 ref_model: torch.nn.Module | None = None):
        # deferred: torch is heavy to import
        import torch

        if temperature <= 0:
            raise ValueError(f"temperature: log-probs are recomputed at the sampling temperature, which must be > 0 "
                             f"(0 is greedy decoding, which GRPO cannot train on), got {temperature}")
        if grpo.kl_coef > 0 and ref_model is None and grpo.lora is None:
            raise ValueError("grpo.kl_coef > 0 needs a reference: pass ref_model=..., enable LoRA, or set kl_coef=0")
        self.grpo, self.temperature, self.pad_token_id = grpo, temperature, pad_token_id
        self.model = apply_lora(model, grpo.lora) if grpo.lora is not None else model
        self.ref_model = ref_model
        if ref_model is not None:
            ref_model.eval().requires_grad_(False)
        self.device = next(self.model.parameters()).device
        decay, no_decay = [], []
        for param in self.model.parameters():
            if param.requires_grad:
                (decay if param.dim() >= 2 else no_decay).append(param)
        self.params = decay + no_decay
        self.optimizer = torch.optim.AdamW(
            [
                {"params": decay, "weight_decay": grpo.weight_decay},
                {"params": no_decay, "weight_decay": 0.0},
            ],
            lr=grpo.lr,
            betas=grpo.betas,
            eps=ADAM_EPS,
        )

    @property
    def uses_reference(self) -> bool:
        """Whether a reference model (explicit, or the LoRA base) scores tokens for the KL term."""
        return self.ref_model is not None or (self.grpo.lora is not None and self.grpo.kl_coef > 0)

    def _autocast(self) -> AbstractContextManager[Any]:
        # deferred: torch is heavy to import
        import torch

        mode = self.grpo.autocast
        enabled = mode == "bf16" or (mode == "auto" and self.device.type == "cuda")
        if not enabled:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)

    def _logits(self, model: torch.nn.Module, batch: MicroBatch, scored: ScoredTokens) -> torch.Tensor:
        """``(N, V)`` logits at the ``scored`` positions only (:func:`~intraskill.training.loss.scored_tokens`): the
        decoder's final hidden states there through the LM head, as the causal LM's own forward computes them.

        The rows are right-padded (:func:`~intraskill.training.batching.collate`), so plain causal attention already
        keeps every real token from the pads after it: no mask is passed, and attention runs its causal kernel."""
        causal_lm = model.get_base_model() if hasattr(model, "get_base_model") else model
        with self._autocast():
            hidden = causal_lm.get_decoder()(input_ids=batch.input_ids, use_cache=False).last_hidden_state
            return causal_lm.get_output_embeddings()(hidden[scored])

    def _logprobs(self, model: torch.nn.Module, batch: MicroBatch) -> tuple[torch.Tensor, torch.Tensor, ScoredTokens]:
        """``(token log-probs (B, T), kept logits (N, V), where they were kept)`` of one micro-batch."""
        scored = scored_tokens(batch.loss_mask)
        logits = self._logits(model, batch, scored)
        return token_logprobs(logits, batch.input_ids, self.temperature, scored), logits, scored

    def _reference_logprobs(self, batch: MicroBatch) -> torch.Tensor:
        # deferred: torch is heavy to import
        import torch

        with torch.no_grad():
            if self.ref_model is not None:
                return self._logprobs(self.ref_model, batch)[0]
            with self.model.disable_adapter():
                return self._logprobs(self.model, batch)[0]

    def micro_batches(self, samples: Sequence[TrainSample]) -> list[list[int]]:
        """Index lists of the micro-batches of ``samples`` (first-fit decreasing under the token budget)."""
        return pack_micro_batches([len(s) for s in samples], self.grpo.micro_batch_tokens)

    def compute_logprobs(self, samples: Sequence[TrainSample]) -> list[list[float]]:
        """Current-policy log-probs of each sample's tokens at the sampling temperature.

        Same layout as ``SessionTokens.logprobs``: 0.0 where the loss mask is 0. Useful to re-score
        rollouts with the training engine, and in tests (old == new gives ratio 1).
        """
        # deferred: torch is heavy to import
        import torch

        was_training = self.model.training
        self.model.eval()
        out: list[list[float]] = [[] for _ in samples]
        try:
            with torch.no_grad():
                for indices in self.micro_batches(samples):
                    batch = collate([samples[i] for i in indices], self.device, self.pad_token_id)
                    logp = (self._logprobs(self.model, batch)[0] * batch.loss_mask).cpu()
                    for row, index in enumerate(indices):
                        out[index] = logp[row, : len(samples[index])].tolist()
        finally:
            self.model.train(was_training)
        return out

    def accumulate_update(self, samples: Sequence[TrainSample]) -> UpdateTotals:
        """Forward and backward every micro-batch of one update, accumulating ``.grad`` (no optimizer step).

        Each micro-batch's loss is divided by the update's total loss-mask token count, so the
        accumulated gradient is that of one token mean over the update; weighted samples
        (:attr:`~intraskill.training.batching.TrainSample.weight`) enter the policy loss as a weighted sum instead.
        """
        model_tokens = sum(s.model_tokens for s in samples)
        sample_weighting(samples)
        if model_tokens == 0:
            raise ValueError("the update holds no loss-mask tokens; every TrainSample has loss_mask all 0")
        grpo = self.grpo
        totals = UpdateTotals(model_tokens=model_tokens)
        bins = self.micro_batches(samples)
        totals.real_tokens, totals.padded_tokens, _ = padding_waste([len(s) for s in samples], bins)
        totals.micro_batches = len(bins)
        for indices in bins:
            flops, moved = self._work([samples[i] for i in indices]) if recording() else (0, 0)
            with phase("forward"):
                add_work(flops, moved)
                batch = collate([samples[i] for i in indices], self.device, self.pad_token_id)
                logp, logits, scored = self._logprobs(self.model, batch)
                pg_loss, clipfrac, approx_kl = clipped_surrogate(
                    logp, batch.old_logprobs, batch.advantages, batch.loss_mask, grpo.eps_low, grpo.eps_high,
                    denominator=model_tokens, weights=batch.loss_weights,
                )
                loss = pg_loss
                if self.uses_reference:
                    kl = k3_kl(logp, self._reference_logprobs(batch), batch.loss_mask, denominator=model_tokens)
                    loss = loss + grpo.kl_coef * kl
                    totals.kl_ref += float(kl.detach())
            with phase("backward"):
                add_work(2 * flops, 2 * moved)
                loss.backward()
            entropy = masked_sum_mean(
                token_entropy(logits.detach(), self.temperature, scored, tuple(batch.input_ids.shape)),
                batch.loss_mask, denominator=model_tokens,
            )
            totals.loss += float(loss.detach())
            totals.pg_loss += float(pg_loss.detach())
            totals.clipfrac += float(clipfrac)
            totals.approx_kl += float(approx_kl)
            totals.entropy += float(entropy)
        return totals

    def _check_finite_weights(self, update: int) -> None:
        """Raise :class:`NonFiniteUpdateError` naming the first trainable weight the last step made non-finite."""
        # deferred: torch is heavy to import
        import torch

        if bool(torch.stack([torch.isfinite(p).all() for p in self.params]).all()):
            return
        name = next(n for n, p in self.model.named_parameters() if p.requires_grad and not torch.isfinite(p).all())
        raise NonFiniteUpdateError(f"update {update} of this step made {name} non-finite (lr "
                                   f"{self.optimizer.param_groups[0]['lr']}); stopped before any checkpoint holds it")

    def _work(self, samples: Sequence[TrainSample]) -> tuple[int, int]:
        """Useful forward FLOPs and bytes of ``samples`` (whole streams, logits at their loss-mask tokens only)."""
        shape = TransformerShape.of(self.model.config, self.model.dtype.itemsize)
        spans, rows = [(0, len(s)) for s in samples], sum(s.model_tokens for s in samples)
        return shape.forward(spans, rows), shape.forward_bytes(spans, rows)

    def train_step(self, batch: list[TrainSample]) -> StepMetrics:
        """One rollout step: ``len(episodes) / global_batch_size`` optimizer updates over whole groups."""
        # deferred: torch is heavy to import
        import torch

        if not batch:
            raise ValueError("train_step needs at least one TrainSample")
        grpo = self.grpo
        if grpo.global_batch_size is None:
            updates = [list(batch)]
        else:
            updates = split_updates(batch, grpo.global_batch_size)
        self.model.train()
        start = time.perf_counter()
        step = UpdateTotals()
        grad_norms: list[float] = []
        for samples in updates:
            self.optimizer.zero_grad(set_to_none=True)
            totals = self.accumulate_update(samples)
            step.add(totals)
            with phase("optimizer"):
                if recording():  # clipping reads the gradients twice and writes them; AdamW reads weight, gradient and
                    # both moments and writes all but the gradient
                    add_work(0, 10 * sum(p.numel() * p.element_size() for p in self.params))
                max_norm = grpo.max_grad_norm if grpo.max_grad_norm is not None else float("inf")
                grad_norms.append(float(torch.nn.utils.clip_grad_norm_(self.params, max_norm)))
                if not (math.isfinite(totals.loss) and math.isfinite(grad_norms[-1])):
                    raise NonFiniteUpdateError(
                        f"update {len(grad_norms)} of this step: loss {totals.loss}, gradient norm {grad_norms[-1]}; "
                        "stopped before the optimizer step (no checkpoint holds it)")
                self.optimizer.step()
                self._check_finite_weights(len(grad_norms))
        self.optimizer.zero_grad(set_to_none=True)
        duration = time.perf_counter() - start
        real, padded = step.real_tokens, step.padded_tokens
        return StepMetrics(
            loss=step.mean("loss"),
            pg_loss=step.mean("pg_loss"),
            clipfrac=step.mean("clipfrac"),
            approx_kl=step.mean("approx_kl"),
            entropy=step.mean("entropy"),
            kl_ref=step.mean("kl_ref") if self.uses_reference else None,
            grad_norm=sum(grad_norms) / len(grad_norms),
            updates=len(updates),
            micro_batches=step.micro_batches,
            samples=len(batch),
            episodes=len({(s.group_index, s.rollout_id) for s in batch}),
            groups=len({s.group_index for s in batch}),
            model_tokens=step.model_tokens,
            real_tokens=real,
            padded_tokens=padded,
            padding_waste=1.0 - real / padded if padded else 0.0,
            duration_s=duration,
            tokens_per_s=real / duration if duration > 0 else 0.0,
            lr=float(self.optimizer.param_groups[0]["lr"]),
            grad_norms=grad_norms,
        )
