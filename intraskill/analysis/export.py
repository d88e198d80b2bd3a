"""Episode and turn tables of a run directory, exported as Parquet and CSV with one typed schema.

:func:`export_run` walks a run directory of any stage (a round's ``steps/step-*/``, a gate, an
evaluation, co-evolve rounds, the cells of an experiment matrix) for the files that hold
``intraskill-episode-v1`` traces (:data:`TRACE_FILES`; a Skill1 step's records carry their trace under
``trace``) and writes ``episodes`` (one row per episode attempt) and ``turns`` (one row per model turn).
:data:`SCHEMA` types and documents every column once, in English and Chinese; the export, the report's
schema page and the tests read it.

The store's private goal (the trace's ``private_goal``) is never exported, and neither are the pages the
policy saw (a turn keeps only their length): the gold reaches the tables only through the final reward
and its ``r_*`` parts.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from intraskill.agent.skill1_episode import SKILL1_EPISODE_SCHEMA
from intraskill.agent.traces import TRACE_SCHEMA_VERSION, EpisodeTrace
from intraskill.jsonl import JsonlError, iter_jsonl
from intraskill.layout import PLAN, RETRIES, SKILL1_EPISODES, STEPS, TRACES
from intraskill.shop.reward import PRIMARY_REWARD
from intraskill.skills.render import chunk_title

if TYPE_CHECKING:
    import pandas as pd

TRACE_FILES = (TRACES, RETRIES, SKILL1_EPISODES)
"""File names that hold episode traces (evaluation, gate and rollout steps; round retries; Skill1 steps)."""
FORMATS = ("parquet", "csv")
PANDAS_DTYPES = {"string": "string", "int": "Int64", "float": "Float64", "bool": "boolean"}
"""Schema type → pandas nullable dtype (a missing value stays missing in both formats)."""
TRAIN_MARKERS = (STEPS, RETRIES, SKILL1_EPISODES)
"""A trace file under ``steps/`` (or a retry / Skill1 file) without a ``plan.json`` is a training rollout."""


@dataclass(frozen=True)
class Column:
    """One exported column: its name, schema type (:data:`PANDAS_DTYPES` key) and meaning in en / zh."""

    name: str
    kind: str
    en: str
    zh: str


def _columns(*rows: tuple[str, str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(*row) for row in rows)


_SOURCE = (
    ("run", "string", "Name of the exported run directory.", "导出的运行目录名。"),
    ("part", "string", "Folder of the trace file inside the run (e.g. steps/step-0003, gate, eval/test-free).",
     "轨迹文件在运行目录中的子目录（如 steps/step-0003、gate、eval/test-free）。"),
    ("file", "string", "Trace file name (traces.jsonl, retries.jsonl or skill1_episodes.jsonl).",
     "轨迹文件名（traces.jsonl、retries.jsonl 或 skill1_episodes.jsonl）。"),
    ("line", "int", "Line of the episode's record in that file (1-based).", "该回合记录在文件中的行号（从 1 开始）。"),
    ("episode_id", "string", "Episode identifier, unique within a trace file.", "回合标识，在一个轨迹文件内唯一。"),
)
_REWARD_PARTS = {
    PRIMARY_REWARD: ("Final reward (equals r_strict); empty for a technically failed episode.",
                     "最终奖励（等于 r_strict）；技术失败的回合为空。"),
    "r_type": ("Reward part: product type matches the goal.", "奖励分项：商品类型与目标一致。"),
    "r_att": ("Reward part: share of goal attributes matched.", "奖励分项：目标属性的匹配比例。"),
    "r_option": ("Reward part: share of goal options matched.", "奖励分项：目标选项的匹配比例。"),
    "r_price": ("Reward part: price within the goal's budget.", "奖励分项：价格在目标预算之内。"),
    "r_loose": ("Reward part: loose score (type, attributes, options, price).", "奖励分项：宽松得分（类型、属性、选项、价格）。"),
    "r_strict": ("Reward part: strict score (the primary reward).", "奖励分项：严格得分（主奖励）。"),
    "r_success": ("Reward part: 1 when the purchase fully satisfies the goal, else 0.", "奖励分项：购买完全满足目标时为 1，否则为 0。"),
}
EPISODE_COLUMNS = _columns(
    *_SOURCE,
    ("split", "string", "Task split: train (rollouts), val or test (from the run's plan.json).",
     "任务划分：train（训练 rollout）、val 或 test（取自运行的 plan.json）。"),
    ("task_id", "int", "Task index in the store's split.", "任务在商店划分中的编号。"),
    ("sample_id", "int", "Sample index of the task (GRPO group member or repeat).", "该任务的样本序号（GRPO 组成员或重复）。"),
    ("seed", "int", "Episode seed (sampling of the policy).", "回合种子（策略采样）。"),
    ("status", "string", "completed (scored) or failed (a technical error, unscored).", "completed（已评分）或 failed（技术错误，未评分）。"),
    ("model_id", "string", "Policy model identifier.", "策略模型标识。"),
    ("checkpoint_id", "string", "Checkpoint identifier (SHA-256 of the weights).", "检查点标识（权重的 SHA-256）。"),
    ("n_skills", "int", "Number of skills in the prompt's skill context.", "提示中技能上下文的技能数。"),
    ("skill_ids", "string", "Skill ids in the prompt, in order, joined by '; ' (Skill1 skills are skill1-<id>).",
     "提示中的技能 id，按顺序以 '; ' 连接（Skill1 技能为 skill1-<id>）。"),
    ("skill_titles", "string", "Their titles (a chunk's heading; a Skill1 skill's description), joined by '; '.",
     "对应标题（技能块的标题；Skill1 技能的描述），以 '; ' 连接。"),
    ("success", "bool", "r_success == 1; empty when the episode is unscored.", "r_success 等于 1；未评分时为空。"),
    *((name, "float", en, zh) for name, (en, zh) in _REWARD_PARTS.items()),
    ("turns", "int", "Model turns (protocol repairs included).", "模型轮次（含协议修复）。"),
    ("steps", "int", "Environment steps.", "环境步数。"),
    ("protocol_errors", "int", "Turns whose reply broke the tool-call protocol.", "回复违反工具调用协议的轮次数。"),
    ("invalid_actions", "int", "Actions the store refused.", "被商店拒绝的动作数。"),
    ("prompt_tokens", "int", "Prompt tokens over the episode's turns.", "各轮提示 token 之和。"),
    ("completion_tokens", "int", "Generated tokens over the episode's turns.", "各轮生成 token 之和。"),
    ("termination_reason", "string", "Why the episode ended (purchase, max_turns, …).", "回合结束原因（purchase、max_turns 等）。"),
    ("purchased_asin", "string", "ASIN the agent bought; empty without a purchase.", "智能体购买的 ASIN；未购买时为空。"),
    ("duration_ms", "int", "Wall-clock duration of the episode in milliseconds.", "回合耗时（毫秒）。"),
    ("error", "string", "Technical error of a failed episode.", "失败回合的技术错误。"),
)
TURN_COLUMNS = _columns(
    *_SOURCE,
    ("turn", "int", "Turn index within the episode (0-based).", "回合内的轮次序号（从 0 开始）。"),
    ("action", "string", "Parsed action sent to the store; empty on a protocol error.", "发送给商店的解析后动作；协议错误时为空。"),
    ("tool", "string", "Name of the first tool call of the reply.", "回复中第一个工具调用的名称。"),
    ("valid", "bool", "The store executed the action; empty when no action reached it.", "商店执行了该动作；没有动作到达商店时为空。"),
    ("parse_error", "string", "Why the reply could not be parsed, if so.", "回复无法解析时的原因。"),
    ("protocol_error", "string", "The tool-call protocol error of the reply, if any.", "回复的工具调用协议错误（如有）。"),
    ("finish_reason", "string", "Why generation stopped (stop, length, …).", "生成停止的原因（stop、length 等）。"),
    ("page_type", "string", "Type of the page the store returned.", "商店返回的页面类型。"),
    ("page_chars", "int", "Length in characters of the page the store returned (the page itself is not exported).",
     "商店返回页面的字符数（页面本身不导出）。"),
    ("reply_chars", "int", "Length in characters of the model's raw reply.", "模型原始回复的字符数。"),
    ("prompt_tokens", "int", "Prompt tokens of the turn.", "该轮的提示 token 数。"),
    ("completion_tokens", "int", "Generated tokens of the turn.", "该轮生成的 token 数。"),
)
SCHEMA: dict[str, tuple[Column, ...]] = {"episodes": EPISODE_COLUMNS, "turns": TURN_COLUMNS}
"""Every exported table and its columns, in file order."""


@dataclass(frozen=True)
class RunTables:
    """A run's exported rows and the trace files they came from (paths relative to the run directory)."""

    run: str
    files: tuple[str, ...]
    episodes: list[dict[str, Any]]
    turns: list[dict[str, Any]]


@dataclass(frozen=True)
class ExportResult:
    """What :func:`export_run` wrote: ``paths[table][format]`` and the row counts."""

    run: str
    files: tuple[str, ...]
    episodes: int
    turns: int
    paths: dict[str, dict[str, str]]


def find_trace_files(run_dir: str | Path) -> list[Path]:
    """Every trace file (:data:`TRACE_FILES`) under ``run_dir``, in path order."""
    root = Path(run_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such run directory")
    return sorted(path for name in TRACE_FILES for path in root.rglob(name) if path.is_file())


def trace_split(path: Path, run_dir: Path) -> str | None:
    """The split of a trace file: the nearest ``plan.json`` ``split`` up to ``run_dir``, else ``train`` for a
    rollout step, a retry or a Skill1 file, else ``None``."""
    for folder in (path.parent, *path.parent.parents):
        plan = folder / PLAN
        if plan.is_file():
            split = json.loads(plan.read_text(encoding="utf-8")).get("split")
            if isinstance(split, str):
                return split
        if folder == run_dir:
            break
    parts = path.relative_to(run_dir).parts
    return "train" if any(marker in parts for marker in TRAIN_MARKERS) else None


def trace_records(path: Path) -> Iterator[tuple[int, EpisodeTrace, dict[str, str]]]:
    """``(line, trace, skill titles by id)`` of each record; errors name ``file:line``."""
    lines = path.read_bytes().split(b"\n")
    numbers = [number for number, line in enumerate(lines, start=1) if line.strip()]
    for number, record in zip(numbers, iter_jsonl(path)):
        titles: dict[str, str] = {}
        try:
            if record.get("schema_version") == SKILL1_EPISODE_SCHEMA:
                titles = {f"skill1-{c['skill']['skill_id']}": str(c["skill"]["desc"]) for c in record["candidates"]}
                record = record["trace"]
            yield number, EpisodeTrace.from_dict(record), titles
        except (KeyError, TypeError, ValueError) as error:
            kind = type(error).__name__
            raise JsonlError(f"{path}:{number}: not an {TRACE_SCHEMA_VERSION} trace ({kind}: {error})") from None


def episode_row(trace: EpisodeTrace, source: Mapping[str, Any], titles: Mapping[str, str]) -> dict[str, Any]:
    """The ``episodes`` row of one trace (``source``: run, part, file, line, split)."""
    selected = trace.provenance.get("selected_skills") or []
    ids = [str(skill["skill_id"]) for skill in selected]
    reward = trace.reward.to_dict() if trace.reward is not None else {}
    purchase = trace.purchase or {}
    counts, tokens = trace.counts, trace.tokens
    return {
        **source,
        "episode_id": trace.episode_id,
        "task_id": trace.task_id,
        "sample_id": trace.sample_id,
        "seed": (trace.provenance.get("seeds") or {}).get("episode_seed"),
        "status": trace.status,
        "model_id": trace.provenance.get("model_id"),
        "checkpoint_id": trace.provenance.get("checkpoint_id"),
        "n_skills": len(ids),
        "skill_ids": "; ".join(ids),
        "skill_titles": "; ".join(titles.get(i) or chunk_title(str(s.get("content", ""))) for i, s in zip(ids, selected)),
        "success": reward["r_success"] == 1.0 if reward else None,
        **{name: reward.get(name) for name in _REWARD_PARTS},
        "turns": len(trace.turns),
        "steps": counts.get("steps"),
        "protocol_errors": counts.get("protocol_errors"),
        "invalid_actions": counts.get("invalid_actions"),
        "prompt_tokens": tokens.get("prompt"),
        "completion_tokens": tokens.get("completion"),
        "termination_reason": trace.termination_reason,
        "purchased_asin": purchase.get("asin"),
        "duration_ms": trace.duration_ms,
        "error": trace.error,
    }


def turn_rows(trace: EpisodeTrace, source: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``turns`` rows of one trace."""
    return [
        {
            **source,
            "episode_id": trace.episode_id,
            "turn": turn.turn,
            "action": turn.action,
            "tool": turn.tool_calls[0].get("name") if turn.tool_calls else None,
            "valid": turn.action_valid,
            "parse_error": turn.parse_error,
            "protocol_error": turn.protocol_error,
            "finish_reason": turn.finish_reason,
            "page_type": turn.page_type,
            "page_chars": len(turn.observation) if turn.observation is not None else None,
            "reply_chars": len(turn.raw_output),
            "prompt_tokens": turn.prompt_tokens,
            "completion_tokens": turn.completion_tokens,
        }
        for turn in trace.turns
    ]


def read_run(run_dir: str | Path, name: str | None = None) -> RunTables:
    """Every episode and turn row of a run directory; ``FileNotFoundError`` when it holds no trace file."""
    root = Path(run_dir)
    files = find_trace_files(root)
    if not files:
        raise FileNotFoundError(f"{root}: no trace files ({', '.join(TRACE_FILES)}) under this directory")
    run = name or root.resolve().name
    episodes: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for path in files:
        relative = path.relative_to(root)
        split = trace_split(path, root)
        for line, trace, titles in trace_records(path):
            source = {"run": run, "part": relative.parent.as_posix(), "file": path.name, "line": line}
            episodes.append(episode_row(trace, {**source, "split": split}, titles))
            turns.extend(turn_rows(trace, source))
    return RunTables(run, tuple(p.relative_to(root).as_posix() for p in files), episodes, turns)


def typed_frame(rows: Sequence[Mapping[str, Any]], table: str) -> "pd.DataFrame":
    """The rows as a DataFrame with :data:`SCHEMA`'s columns, in order, each in its nullable dtype."""
    # deferred: pandas is heavy to import
    import pandas as pd

    columns = SCHEMA[table]
    frame = pd.DataFrame.from_records(list(rows), columns=[c.name for c in columns])
    return frame.astype({c.name: PANDAS_DTYPES[c.kind] for c in columns})


def schema_frame(table: str, language: str = "en") -> "pd.DataFrame":
    """The schema page's table of ``table``: column, type and meaning in ``language`` (``en`` / ``zh``)."""
    # deferred: pandas is heavy to import
    import pandas as pd

    if language not in ("en", "zh"):
        raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
    return pd.DataFrame([(c.name, c.kind, getattr(c, language)) for c in SCHEMA[table]],
                        columns=["column", "type", "meaning"])


def export_run(run_dir: str | Path, out_dir: str | Path, formats: Sequence[str] = FORMATS,
               name: str | None = None) -> ExportResult:
    """Write ``<out_dir>/episodes.<fmt>`` and ``<out_dir>/turns.<fmt>`` for each of ``formats``."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown or not formats:
        raise ValueError(f"formats: expected some of {', '.join(FORMATS)}, got {', '.join(formats) or 'none'}")
    tables = read_run(run_dir, name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, dict[str, str]] = {}
    for table, rows in (("episodes", tables.episodes), ("turns", tables.turns)):
        frame = typed_frame(rows, table)
        paths[table] = {}
        for fmt in formats:
            target = out / f"{table}.{fmt}"
            if fmt == "parquet":
                frame.to_parquet(target, index=False)
            else:
                frame.to_csv(target, index=False)
            paths[table][fmt] = str(target)
    return ExportResult(tables.run, tables.files, len(tables.episodes), len(tables.turns), paths)
