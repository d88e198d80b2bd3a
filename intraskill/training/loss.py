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


ScoredTokens = tuple["torch.Tensor", "torch.Tensor"]
"""``(rows, positions)``: the logits kept for an update, row by row (:func:`scored_tokens`)."""


def _predicting(logits: torch.Tensor, input_ids: torch.Tensor, scored: ScoredTokens | None
                ) -> tuple[torch.Tensor, torch.Tensor, ScoredTokens]:
    """The logits that predict a token, the tokens they predict, and where: all ``T-1`` positions of every row
    (flattened), or the ``(N, V)`` logits kept at ``scored``."""
    # deferred: torch is heavy to import
    import torch

    if scored is None:
        batch, length = input_ids.shape
        rows = torch.arange(batch, device=logits.device).repeat_interleave(length - 1)
        positions = torch.arange(length - 1, device=logits.device).repeat(batch)
        return logits[:, :-1].reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1), (rows, positions)
    rows, positions = scored
    if logits.dim() != 2 or logits.shape[0] != rows.numel():
        raise ValueError(f"logits of shape {tuple(logits.shape)} are not the (N, V) logits of {rows.numel()} scored "
                         "positions")
    return logits, input_ids[rows, positions + 1], scored


def _spread(values: torch.Tensor, scored: ScoredTokens, shape: tuple[int, int]) -> torch.Tensor:
    """Place ``(N,)`` values predicted at ``scored`` onto their tokens of a ``(B, T)`` zero tensor."""
    rows, positions = scored
    return values.new_zeros(shape).index_put((rows, positions + 1), values)


def scored_tokens(loss_mask: torch.Tensor) -> ScoredTokens:
    """Row by row, the positions whose logits predict a loss-mask token (``t - 1`` for each such token ``t``).

    Pass them to the trainer's head and on to :func:`token_logprobs` / :func:`token_entropy`: only these
    positions are projected onto the vocabulary (a row's prompt and pages, and the other rows' replies, are
    not), so an update computes ``N`` rows of logits for its ``N`` loss-mask tokens.

    Examples
    --------
    >>> import torch
    >>> rows, positions = scored_tokens(torch.tensor([[0, 0, 1, 1], [0, 1, 0, 0]]))
    >>> rows.tolist(), positions.tolist()
    ([0, 0, 1], [1, 2, 0])
    """
    return (loss_mask[:, 1:] != 0).nonzero(as_tuple=True)


def token_logprobs(logits: torch.Tensor, input_ids: torch.Tensor, temperature: float,
                   scored: ScoredTokens | None = None) -> torch.Tensor:
    """Log-probability of each token under the temperature-scaled distribution of the previous position.

    This is what the rollout recorded (log-softmax of ``logits / temperature``), so the trainer must
    use the rollout's sampling temperature.

    Parameters
    ----------
    logits
        ``(B, T, V)`` model outputs (any float dtype; computed in float32), or ``(N, V)`` at ``scored``.
    input_ids
        ``(B, T)`` token ids.
    temperature
        Sampling temperature, > 0.
    scored
        The ``(rows, positions)`` the logits were kept at (:func:`scored_tokens`); ``None``: all of them.

    Returns
    -------
    torch.Tensor
        ``(B, T)`` float32; column 0, and every token not predicted at ``scored``, is 0.

    Examples
    --------
    >>> import torch
    >>> logits = torch.zeros(1, 2, 4)
    >>> token_logprobs(logits, torch.tensor([[0, 3]]), 1.0)
    tensor([[ 0.0000, -1.3863]])
    """
    logits, targets, scored = _predicting(logits, input_ids, scored)
    log_probs = _scaled_log_softmax(logits, temperature)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    return _spread(picked, scored, tuple(input_ids.shape))


def token_entropy(logits: torch.Tensor, temperature: float, scored: ScoredTokens | None = None,
                  shape: tuple[int, int] | None = None) -> torch.Tensor:
    """Entropy (nats) of the temperature-scaled next-token distribution that produced each token.

    Returns ``(B, T)`` float32 aligned with ``input_ids`` (column 0 is 0). With ``scored`` (the ``(N, V)`` logits
    were kept there), ``shape`` is the batch's ``(B, T)`` and tokens not predicted there hold 0.

    Examples
    --------
    >>> import torch
    >>> token_entropy(torch.zeros(1, 2, 4), 1.0)
    tensor([[0.0000, 1.3863]])
    """
    # deferred: torch is heavy to import
    import torch

    if scored is not None and shape is None:
        raise ValueError("token_entropy at scored positions needs the batch shape")
    shape = tuple(logits.shape[:2]) if scored is None else shape
    ids = torch.zeros(shape, dtype=torch.long, device=logits.device)
    logits, _, scored = _predicting(logits, ids, scored)
    log_probs = _scaled_log_softmax(logits, temperature)
    return _spread(-(log_probs.exp() * log_probs).sum(dim=-1), scored, shape)


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
    weights: torch.Tensor | None = None,
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
    weights
        ``(B, T)`` per-token loss weights: the loss is then ``sum(weights * loss_t)`` over mask tokens (no
        denominator), an objective whose terms are means over samples; the diagnostics stay token means.

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
    per_token = torch.maximum(unclipped, clipped)
    if weights is None:
        loss = masked_sum_mean(per_token, mask, denominator)
    else:
        loss = masked_sum_mean(per_token * weights.detach().to(per_token.dtype), mask, 1.0)
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
