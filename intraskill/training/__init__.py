"""GRPO training core: advantages, the clipped objective, batching, admission, triage and the trainer step.

Torch is imported inside functions only, so importing this package stays cheap.
"""

from intraskill.training.admission import (
    AdmissionResult,
    FinishedGroup,
    GroupAdmission,
    RolloutOutcome,
    UnscoredStreakError,
    admission_metrics,
    admit_groups,
)
from intraskill.training.advantages import group_advantages, segment_advantages
from intraskill.training.batching import (
    TrainSample,
    pack_micro_batches,
    split_updates,
    train_samples_from_groups,
)
from intraskill.training.grpo import GRPOTrainer, StepMetrics
from intraskill.training.triage import RetryOutcome, TriageClass, TriageRecord, frontier_metrics, triage_group

__all__ = [
    "AdmissionResult",
    "FinishedGroup",
    "GRPOTrainer",
    "GroupAdmission",
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
