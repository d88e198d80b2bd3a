"""Pure tensor functions of the GRPO objective: token log-probs, the clipped surrogate and KL terms.

Shapes: ``B`` sequences of ``T`` tokens over a vocabulary of ``V``. Every per-token tensor is aligned
with ``input_ids``: position ``t`` holds the quantity for token ``t`` given tokens ``< t``; position 0
has no prefix and holds 0 (its loss mask must be 0).

Aggregation. Every reduction is ``sum over loss-mask tokens / denominator``. The default
denominator is the number of mask tokens in the tensor (a token mean). Under gradient
accumulation the trainer passes the number of mask tokens of the whole optimizer update, so the
micro-batch terms add up to one token mean over the global batch (each model-generated token of the
update weighs the same; slime instead averages per rollout first, docs/slime.md §4).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def _scaled_log_softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """``log_softmax(logits / temperature)`` in float32 over the last (vocabulary) axis."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0 to score sampled tokens, got {temperature}")
    return (logits.float() / temperature).log_softmax(dim=-1)


def _predicting(logits: torch.Tensor, length: int, positions: torch.Tensor | None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The logits that predict a token and their positions: all ``T-1`` of them, or the given ones."""
    # deferred: torch is heavy to import
    import torch

    if positions is None:
        return logits[:, :-1], torch.arange(length - 1, device=logits.device)
    if logits.shape[1] != positions.numel():
        raise ValueError(f"logits hold {logits.shape[1]} positions, positions name {positions.numel()}")
    return logits, positions


def _spread(values: torch.Tensor, positions: torch.Tensor, length: int) -> torch.Tensor:
    """Place ``(B, K)`` values predicted at ``positions`` onto their tokens' columns of a ``(B, T)`` zero tensor."""
    return values.new_zeros(values.shape[0], length).index_copy(1, positions + 1, values)


def scored_positions(loss_mask: torch.Tensor) -> torch.Tensor:
    """Positions whose logits predict a loss-mask token in some row (``t - 1`` for each such column ``t``).

    Pass them to the model as ``logits_to_keep`` and on to :func:`token_logprobs` / :func:`token_entropy`:
    only these positions are projected onto the vocabulary, so a micro-batch of long prompts and pages does not
    hold ``(B, T, V)`` float logits (8k tokens of a 49k vocabulary are 1.6 GB per copy).

    Examples
    --------
    >>> import torch
    >>> scored_positions(torch.tensor([[0, 0, 1, 1], [0, 1, 0, 0]]))
    tensor([0, 1, 2])
    """
    return (loss_mask[:, 1:] != 0).any(dim=0).nonzero().flatten()


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float,
                   positions: torch.Tensor | None = None) -> torch.Tensor:
    """Log-probability of each token under the temperature-scaled distribution of the previous position.

    This is what the rollout recorded (log-softmax of ``logits / temperature``), so the trainer must
    use the rollout's sampling temperature.

    Parameters
    ----------
    logits
        ``(B, T, V)`` model outputs (any float dtype; computed in float32), or ``(B, K, V)`` at ``positions``.
    input_ids
        ``(B, T)`` token ids.
    temperature
        Sampling temperature, > 0.
    positions
        ``(K,)`` the positions ``logits`` were kept at (:func:`scored_positions`); ``None``: all of them.

    Returns
    -------
    torch.Tensor
        ``(B, T)`` float32; column 0, and every token not predicted at ``positions``, is 0.

    Examples
    --------
    >>> import torch
    >>> logits = torch.zeros(1, 2, 4)
    >>> token_logprobs(logits, torch.tensor([[0, 3]]), 1.0)
    tensor([[ 0.0000, -1.3863]])
    """
    length = input_ids.shape[1]
    logits, positions = _predicting(logits, length, positions)
    log_probs = _scaled_log_softmax(logits, temperature)
    picked = log_probs.gather(-1, input_ids[:, positions + 1].unsqueeze(-1)).squeeze(-1)
    return _spread(picked, positions, length)


def token_entropy(logits: torch.Tensor, temperature: float, positions: torch.Tensor | None = None,
                  length: int | None = None) -> torch.Tensor:
    """Entropy (nats) of the temperature-scaled next-token distribution that produced each token.

    Returns ``(B, T)`` float32 aligned with ``input_ids`` (column 0 is 0). With ``positions`` (the logits were
    kept there), ``length`` is the sequence length ``T`` and tokens not predicted there hold 0.

    Examples
    --------
    >>> import torch
    >>> token_entropy(torch.zeros(1, 2, 4), 1.0)
    tensor([[0.0000, 1.3863]])
    """
    if positions is not None and length is None:
        raise ValueError("token_entropy at kept positions needs the sequence length")
    length = logits.shape[1] if positions is None else length
    logits, positions = _predicting(logits, length, positions)
    log_probs = _scaled_log_softmax(logits, temperature)
    return _spread(-(log_probs.exp() * log_probs).sum(dim=-1), positions, length)


def masked_sum_mean(
    values: torch.Tensor, mask: torch.Tensor, denominator: float | None = None
) -> torch.Tensor:
    """``sum(values * mask) / denominator``; the denominator defaults to ``mask.sum()`` (at least 1).

    Examples
    --------
    >>> import torch
    >>> masked_sum_mean(torch.tensor([1.0, 2.0, 9.0]), torch.tensor([1, 1, 0]))
    tensor(1.5000)
    """
    # deferred: torch is heavy to import
    import torch

    keep = mask.bool()
    if denominator is None:
        denominator = max(float(keep.sum()), 1.0)
    if denominator <= 0:
        raise ValueError(f"denominator must be > 0, got {denominator}")
    return torch.where(keep, values, torch.zeros_like(values)).sum() / denominator


def clipped_surrogate(
    logp_new: torch.Tensor,
    logp_old: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float = 0.2,
    eps_high: float = 0.28,
    denominator: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """PPO/GRPO clipped surrogate with an asymmetric clip range (DAPO "clip-higher").

    Per token, ``ratio = exp(logp_new - logp_old)`` and

        loss_t = -min(ratio * A, clip(ratio, 1 - eps_low, 1 + eps_high) * A).

    Parameters
    ----------
    logp_new
        ``(B, T)`` current log-probs (the only input gradients flow through).
    logp_old
        ``(B, T)`` log-probs recorded at rollout (detached).
    advantages
        ``(B, T)`` per-token or ``(B,)`` per-sequence advantages (detached).
    mask
        ``(B, T)`` loss mask, 1 on model-generated tokens.
    eps_low, eps_high
        Clip range ``[1 - eps_low, 1 + eps_high]`` (release: 0.2 and 0.28).
    denominator
        See the module docstring; default the mask token count.

    Returns
    -------
    tuple
        ``(loss, clipfrac, approx_kl)``. ``clipfrac`` is the share of mask tokens whose clipped
        branch is active (the min picks the clipped term strictly, so the token gets no gradient);
        ``approx_kl`` is ``mean(logp_old - logp_new)`` (slime's ``train/ppo_kl``). Both diagnostics
        are detached and use the same denominator as the loss.

    Examples
    --------
    >>> import math, torch
    >>> new = torch.tensor([[0.0, math.log(1.5)]])
    >>> mask = torch.tensor([[0, 1]])
    >>> loss, clipfrac, _ = clipped_surrogate(new, torch.zeros(1, 2), torch.tensor([1.0]), mask)
    >>> round(float(loss), 4), float(clipfrac)
    (-1.28, 1.0)
    """
    # deferred: torch is heavy to import
    import torch

    if eps_low < 0 or eps_high < 0:
        raise ValueError(f"eps_low and eps_high must be >= 0, got {eps_low}, {eps_high}")
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    # Masked positions are zeroed before exp so that arbitrary values there (padding, prompt
    # placeholders) can neither change the loss nor produce inf/nan gradients.
    log_ratio = torch.where(mask.bool(), logp_new - logp_old.detach(), torch.zeros_like(logp_new))
    ratio = log_ratio.exp()
    advantages = advantages.detach().to(ratio.dtype)
    unclipped = -ratio * advantages
    clipped = -ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * advantages
    loss = masked_sum_mean(torch.maximum(unclipped, clipped), mask, denominator)
    with torch.no_grad():
        clipfrac = masked_sum_mean((clipped > unclipped).to(ratio.dtype), mask, denominator)
        approx_kl = masked_sum_mean(-log_ratio, mask, denominator)
    return loss, clipfrac, approx_kl


def k3_kl(
    logp_new: torch.Tensor, logp_ref: torch.Tensor, mask: torch.Tensor, denominator: float | None = None
) -> torch.Tensor:
    """The k3 estimator of KL(new || ref) on sampled tokens: ``exp(d) - d - 1``, ``d = logp_ref - logp_new``.

    Non-negative per token, differentiable in ``logp_new``; reduced like the surrogate.

    Examples
    --------
    >>> import math, torch
    >>> kl = k3_kl(torch.tensor([[0.0, 0.0]]), torch.tensor([[0.0, math.log(2.0)]]), torch.tensor([[0, 1]]))
    >>> round(float(kl), 6)  # 2 - ln 2 - 1
    0.306853
    """
    # deferred: torch is heavy to import
    import torch

    delta = torch.where(mask.bool(), logp_ref.detach() - logp_new, torch.zeros_like(logp_new))
    return masked_sum_mean(delta.exp() - delta - 1.0, mask, denominator)
