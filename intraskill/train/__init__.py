"""GRPO training core: advantages, the clipped objective, batching, admission, triage and the trainer step.

Torch is imported inside functions only, so importing this package stays cheap.
"""

from intraskill.train.admission import (
    AdmissionResult,
    FinishedGroup,
    GroupAdmission,
    RolloutOutcome,
    UnscoredStreakError,
    admission_metrics,
    admit_groups,
)
from intraskill.train.advantages import group_advantages, segment_advantages
from intraskill.train.batching import (
    TrainSample,
    pack_micro_batches,
    split_updates,
    train_samples_from_groups,
)
from intraskill.train.grpo import GRPOConfig, GRPOTrainer, LoraSettings, StepMetrics
from intraskill.train.triage import RetryOutcome, TriageClass, TriageRecord, frontier_metrics, triage_group

__all__ = [
    "AdmissionResult",
    "FinishedGroup",
    "GRPOConfig",
    "GRPOTrainer",
    "GroupAdmission",
    "LoraSettings",
    "RetryOutcome",
    "RolloutOutcome",
    "StepMetrics",
    "TrainSample",
    "TriageClass",
    "TriageRecord",
    "UnscoredStreakError",
    "admission_metrics",
    "admit_groups",
    "frontier_metrics",
    "group_advantages",
    "pack_micro_batches",
    "segment_advantages",
    "split_updates",
    "train_samples_from_groups",
    "triage_group",
]
