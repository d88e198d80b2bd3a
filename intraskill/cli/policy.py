"""``intraskill serve-policy``: serve an in-process model over the OpenAI chat-completions protocol."""

from __future__ import annotations

from pathlib import Path

import typer

from intraskill.cli.common import default, load, note
from intraskill.params import UNTRAINED, ModelParams


def serve_policy(
    model: str = typer.Option(default(ModelParams, "spec"), "--model",
                              help="organism | smollm2 | a local HF model directory"),
    checkpoint: str | None = typer.Option(
        None, "--checkpoint",
        help=f"checkpoint directory (save_pretrained), or {UNTRAINED} for the random-init organism; default: "
             "the organism's matching warm start (see --params), another model's own weights"),
    params_path: Path = typer.Option(Path("params/organism.yaml"), "--params",
                                     help="params whose warm start the organism serves when --checkpoint is unset"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port", min=1, max=65535),
    device: str = typer.Option(default(ModelParams, "device"), "--device", help="auto | cpu | cuda | cuda:N"),
    dtype: str = typer.Option(default(ModelParams, "dtype"), "--dtype", help="float32 | bfloat16 | float16"),
    served_name: str | None = typer.Option(None, "--served-name", help="model id in /v1/models (default: --model)"),
    max_batch: int = typer.Option(64, "--max-batch", min=1, help="sessions per lockstep forward"),
    max_sessions: int = typer.Option(256, "--max-sessions", min=1, help="live KV caches kept (LRU)"),
    batch_window_ms: float = typer.Option(5.0, "--batch-window-ms", min=0.0, help="micro-batching window"),
    cache_dir: str | None = typer.Option(None, "--cache-dir", help="cache of the random-init organism"),
    max_body_bytes: int | None = typer.Option(None, "--max-body-bytes", min=1,
                                              help="largest request body in bytes, 413 beyond (default 1 MiB)"),
) -> None:
    """Serve /v1/models and /v1/chat/completions (non-streaming, tools) with lockstep micro-batching."""
    # deferred: uvicorn is heavy to import
    import uvicorn

    # deferred: a verb loads its stage only when it runs
    from intraskill.policy.factory import load_hf_policy, resolve_device
    from intraskill.policy.warmstarts import resolve_checkpoint

    # deferred: fastapi is heavy to import
    from intraskill.http_limits import uvicorn_limits
    from intraskill.policy.server import ServerConfig, create_app

    if model == "organism" and checkpoint is None:
        checkpoint, warmstart = resolve_checkpoint(load(params_path), params_path)
        note(f"--checkpoint unset -> the warm start {warmstart}")
    elif checkpoint == UNTRAINED:
        if model != "organism":
            raise ValueError(f"--checkpoint: {UNTRAINED} names the random-init organism; --model is {model!r}")
        checkpoint = None
    policy = load_hf_policy(model, checkpoint=checkpoint, device=resolve_device(device), dtype=dtype,
                            cache_dir=cache_dir, max_batch=max_batch)
    config = ServerConfig(model_name=served_name or model, max_sessions=max_sessions,
                          batch_window_s=batch_window_ms / 1000.0, max_batch=max_batch,
                          **({"max_body_bytes": max_body_bytes} if max_body_bytes else {}))
    uvicorn.run(create_app(policy, config), host=host, port=port, log_level="warning", **uvicorn_limits())
