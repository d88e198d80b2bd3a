"""The organism's warm start: S₀, the skill-conditioned expert, demo token masks, BC, the shipped file."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from intraskill.agent.env import InProcessEnvironment
from intraskill.chat.chatml import IM_END
from intraskill.layout import WarmstartDir
from intraskill.organism.cloning import (
    BCExample,
    bc_loss,
    behaviour_clone,
    collate,
    learning_rate,
    pack_batches,
)
from intraskill.organism.demos import (
    HABIT_SUPPRESSES,
    S0Error,
    chunk_mask,
    chunk_roles,
    collect_demonstrations,
    demo_jobs,
    s0_law,
    tokenize_demonstration,
)
from intraskill.organism.drills import FILLER, SPAN, copy_drills, ordinary_tokens
from intraskill.organism.manifest import WarmstartCloning, WarmstartManifest, WarmstartMetrics
from intraskill.organism.sensitivity import drop_chunk, reply_logprob, title_sensitivity
from intraskill.organism.shipped import ensure_warmstart, verify_shipped
from intraskill.organism.truth import WarmstartChecks
from intraskill.organism.warmstart import bc_identity, finished_bc
from intraskill.params import ParamsError, load_params, params_from_dict
from intraskill.policy.warmstarts import (
    GROUND_TRUTH_SCHEMA_VERSION,
    GroundTruth,
    MissingWarmstartError,
    read_ground_truth,
    resolve_checkpoint,
    warmstart_matches,
)
from intraskill.shop.scripted_expert import Competences
from intraskill.skills.bank import Skill, SkillBank, load_skillbank

ROOT = Path(__file__).resolve().parents[1]
S0_PATH = ROOT / "params" / "organism_s0.json"
CI = load_params(ROOT / "params" / "ci.yaml")


@pytest.fixture(scope="module")
def engine(organism_engine):
    return organism_engine


def _demos(engine, p_with: dict[str, float], p_without: dict[str, float], count: int, mask: float = 0.5,
           slip_rate: float = 0.0, view: str = "standard"):
    bank = load_skillbank(S0_PATH)
    jobs = demo_jobs(engine.train_ids, count, bank.enabled_skills(), mask, seed=3)
    law = s0_law(bank, p_with, p_without)
    return collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, law, seed=3, max_turns=30,
                                  max_actions=30, slip_rate=slip_rate, view=view, progress=False)


def _uniform(value: float) -> dict[str, float]:
    return {name: value for name in (*Competences.names(), *HABIT_SUPPRESSES)}


@pytest.fixture(scope="module")
def tokenizer(engine):
    from intraskill.policy.organism import protocol_corpus, train_tokenizer

    demos = _demos(engine, _uniform(1.0), _uniform(0.0), 4)
    return train_tokenizer([d.text for d in demos] + protocol_corpus(), 600), demos


def test_s0_bank_validates() -> None:
    bank = load_skillbank(S0_PATH)
    roles = chunk_roles(bank)
    ids = [r.skill_id for r in roles]
    assert len(ids) == len(set(ids)) == 8
    kinds = [r.role for r in roles]
    assert kinds.count("neutral") >= 1 and kinds.count("harmful") >= 1
    helpful = {r.target for r in roles if r.role == "helpful"}
    assert helpful == set(Competences.names())
    assert all(len(skill.content.split()) <= 45 for skill in bank.skills)  # short: ≲ 60 tokens each
    broken = SkillBank("x", (Skill("a", "### A", metadata={"role": "helpful", "competence": "telepathy"}),))
    with pytest.raises(S0Error, match=r"skills\['a'\]\.metadata\.competence"):
        chunk_roles(broken)
    no_harm = SkillBank("x", (Skill("n", "### N", metadata={"role": "neutral"}),))
    with pytest.raises(S0Error, match="harmful"):
        chunk_roles(no_harm)


def test_warmstart_params_validate_and_name_fields() -> None:
    assert CI.warmstart.steps >= 1 and set(CI.warmstart.p_with) == set(CI.warmstart.p_without)
    with pytest.raises(ParamsError, match=r"warmstart: .*p_with\.read_persona"):
        params_from_dict({"experiment": {"name": "x"}, "warmstart": {"p_with": {"read_persona": 1.5},
                                                                      "p_without": {"read_persona": 0.1}}})
    with pytest.raises(ParamsError, match="warmstart.steps"):
        params_from_dict({"experiment": {"name": "x"}, "warmstart": {"steps": 0}})
    with pytest.raises(ParamsError, match="bare_share . alone_share"):
        params_from_dict({"experiment": {"name": "x"}, "warmstart": {"bare_share": 0.6, "alone_share": 0.5}})


def test_demo_masks_mix_bare_alone_and_bernoulli_contexts() -> None:
    """Without shares the masks are the Bernoulli ones (a shipped warm start's demonstrations stay the
    same); with them, bare and single-chunk contexts come at their shares, every chunk alone in turn."""
    skills = load_skillbank(S0_PATH).enabled_skills()
    tasks = list(range(500))
    plain = demo_jobs(tasks, 2000, skills, 0.5, seed=3)
    keys = [f"3:demo-mask:{job.task_id}:{job.sample_id}" for job in plain]
    assert [job.skills for job in plain] == [chunk_mask(skills, 0.5, key) for key in keys]
    mixed = demo_jobs(tasks, 2000, skills, 0.5, seed=3, bare_share=0.2, alone_share=0.3)
    sizes = [len(job.skills) for job in mixed]
    assert abs(sizes.count(0) / 2000 - 0.2 - 0.5 * 0.5 ** len(skills)) < 0.03
    assert abs(sizes.count(1) / 2000 - 0.3 - 0.5 * len(skills) * 0.5 ** len(skills)) < 0.03
    alone = {job.skills[0].skill_id for job in mixed if len(job.skills) == 1}
    assert alone == {skill.skill_id for skill in skills}
    assert demo_jobs(tasks, 2000, skills, 0.5, seed=3, bare_share=0.2, alone_share=0.3) == mixed


def test_law_rates_respond_to_p_with_and_p_without() -> None:
    bank = load_skillbank(S0_PATH)
    p_with, p_without = _uniform(0.9), _uniform(0.2)
    law = s0_law(bank, p_with, p_without)
    rng = random.Random(5)
    with_chunk = sum(law("read_persona", ("persona-query",), rng) for _ in range(4000)) / 4000
    without = sum(law("read_persona", (), rng) for _ in range(4000)) / 4000
    assert abs(with_chunk - 0.9) < 0.03 and abs(without - 0.2) < 0.03
    # the harmful habit switches checking off: P(check) = p_budget · (1 − p_habit)
    hasty = sum(law("check_budget", ("budget-check", "buy-first-result"), rng) for _ in range(4000)) / 4000
    assert abs(hasty - 0.9 * 0.1) < 0.03
    with pytest.raises(S0Error, match="p_with"):
        s0_law(bank, {"read_persona": 1.0}, p_without)


def test_expert_demos_follow_the_chunk_mask(engine) -> None:
    """With p_with = 1, p_without = 0, the first query carries the persona brand iff the chunk is shown."""
    demos = _demos(engine, _uniform(1.0), _uniform(0.0), 10)
    seen = {True: 0, False: 0}
    for demo in demos:
        prompt, query_call = demo.segments[0]
        persona = json.loads(prompt.split("User profile document:\n", 1)[1].split("\n", 1)[0])
        brand = persona["preferences"]["brand"]
        shown = "persona-query" in demo.skill_ids
        assert (brand in query_call) == shown, (demo.skill_ids, query_call)
        seen[shown] += 1
    assert seen[True] and seen[False]


def test_slips_are_read_but_never_cloned(engine) -> None:
    """A slip (``buy now`` not offered) sits inside the next prompt, followed by the page saying so and
    the expert's recovery; the competence draws, hence the rewards, are those of a slip-free run."""
    probabilities = (_uniform(0.9), _uniform(0.5))
    clean = _demos(engine, *probabilities, 16, view="compact")
    slipped = _demos(engine, *probabilities, 16, slip_rate=0.3, view="compact")
    assert [d.reward for d in slipped] == [d.reward for d in clean]
    buy = '"value":"buy now"'
    recovered = 0
    for demo in slipped:
        for index, (prompt, completion) in enumerate(demo.segments):
            if buy in prompt.split("<|im_start|>system", 1)[-1]:
                assert index > 0 and prompt.count(buy) == 1
                assert "Last action: invalid" in prompt[prompt.index(buy):]
                recovered += 1
            assert buy not in completion or '"buy now"' in prompt.rsplit("Tools:", 1)[1]
    assert recovered >= 3
    assert sum("invalid" in d.text for d in clean) == 0


def test_demo_masks_cover_exactly_the_assistant_tokens(tokenizer) -> None:
    tok, demos = tokenizer
    im_end = tok.convert_tokens_to_ids(IM_END)
    for demo in demos:
        ids, mask = tokenize_demonstration(demo.segments, tok)
        assert len(ids) == len(mask)
        assert tok.decode(ids, skip_special_tokens=False) == demo.text
        runs, current = [], []
        for token, bit in zip(ids + [None], mask + [0]):
            if bit:
                current.append(token)
            elif current:
                runs.append(current)
                current = []
        assert len(runs) == len(demo.segments)
        for run, (_, completion) in zip(runs, demo.segments):
            assert run[-1] == im_end
            assert tok.decode(run[:-1], skip_special_tokens=False) == completion
        assert completion.startswith("<tool_call>{") and completion.endswith("}</tool_call>")


def test_bc_reduces_the_assistant_loss(tokenizer) -> None:
    import torch

    from intraskill.policy.organism import OrganismConfig, build_organism

    tok, demos = tokenizer
    windows = [tokenize_demonstration(d.segments[:1], tok) for d in demos[:4]]
    examples = [BCExample(ids[-160:], mask[-160:]) for ids, mask in windows]  # first reply + its context
    model = build_organism(OrganismConfig(vocab_size=600, hidden_size=64, num_layers=2, num_heads=4,
                                          num_kv_heads=2, head_dim=16, intermediate_size=128,
                                          max_position=2048, seed=1), tok)
    ids, labels = collate(examples, int(tok.pad_token_id))
    with torch.no_grad():
        before = float(bc_loss(model, ids, labels))
    result = behaviour_clone(model, examples, steps=20, lr=1e-2, warmup_steps=3, lr_min_ratio=0.1,
                             weight_decay=0.0, grad_clip=1.0, batch_tokens=8192, pad_id=int(tok.pad_token_id),
                             seed=1, progress=False)
    with torch.no_grad():
        after = float(bc_loss(model, ids, labels))
    assert result.steps == 20 and result.losses[-1][0] == 20
    assert after < 0.5 * before, (before, after)


def test_bc_resumes_after_a_kill_to_the_same_weights(tokenizer, tmp_path) -> None:
    """A run killed after a saved state (here the drill → next-token phase boundary) continues from it
    and ends where an unbroken run ends."""
    import torch

    from intraskill.policy.organism import OrganismConfig, build_organism

    tok, demos = tokenizer
    windows = [tokenize_demonstration(d.segments[:1], tok) for d in demos[:6]]
    examples = [BCExample(ids[-96:], mask[-96:]) for ids, mask in windows]
    config = OrganismConfig(vocab_size=600, hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1,
                            head_dim=16, intermediate_size=64, max_position=512, seed=2)
    drills = copy_drills(ordinary_tokens(tok), 12, seed=1)
    settings = dict(steps=6, lm_steps=4, drills=drills, drill_steps=3, lr=5e-3, warmup_steps=2, lr_min_ratio=0.1, weight_decay=0.0,
                    grad_clip=1.0, batch_tokens=200, pad_id=int(tok.pad_token_id), seed=3, progress=False)
    unbroken = build_organism(config, tok)
    full = behaviour_clone(unbroken, examples, **settings)
    state = tmp_path / "bc_state.pt"

    class Killed(Exception):
        pass

    broken = build_organism(config, tok)
    original = torch.optim.AdamW.step
    calls = {"n": 0}

    def step_then_die(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 5:
            raise Killed
        return original(self, *args, **kwargs)

    torch.optim.AdamW.step = step_then_die
    try:
        with pytest.raises(Killed):
            behaviour_clone(broken, examples, state_path=state, state_key="plan", save_every=3, **settings)
    finally:
        torch.optim.AdamW.step = original
    resumed_model = build_organism(config, tok)
    resumed = behaviour_clone(resumed_model, examples, state_path=state, state_key="plan", save_every=3, **settings)
    assert resumed.resumed_at == 3 and resumed.steps == full.steps == 13
    assert [loss for _, loss in resumed.losses] == pytest.approx([loss for _, loss in full.losses], rel=1e-4)
    for a, b in zip(unbroken.parameters(), resumed_model.parameters()):
        assert torch.allclose(a, b, atol=1e-5)
    fresh = behaviour_clone(build_organism(config, tok), examples, state_path=state, state_key="other plan",
                            **settings)
    assert fresh.resumed_at == 0


def test_token_budget_batches_and_schedule() -> None:
    lengths = [random.Random(i).randint(50, 900) for i in range(40)] + [5000]
    batches = pack_batches(lengths, 2048, random.Random(0))
    assert sorted(k for batch in batches for k in batch) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or max(lengths[k] for k in batch) * len(batch) <= 2048
    assert batches == pack_batches(lengths, 2048, random.Random(0))
    rates = [learning_rate(step, 50, 1.0, 5, 0.1) for step in range(50)]
    assert rates[4] == 1.0 and rates[-1] == pytest.approx(0.1) and rates == sorted(rates[:5]) + rates[5:]
    assert all(a >= b for a, b in zip(rates[4:], rates[5:]))


def test_finished_bc_resumes_only_the_same_run(tmp_path: Path, tokenizer) -> None:
    from intraskill.organism.demos import write_demonstrations

    _, demos = tokenizer
    write_demonstrations(demos, tmp_path / "demos.jsonl")
    (tmp_path / "checkpoint").mkdir()
    (tmp_path / "checkpoint" / "config.json").write_text("{}")
    assert finished_bc(tmp_path, CI) is None
    record = WarmstartCloning(identity=bc_identity(tmp_path, CI), demos_s=0.5, steps=1, resumed_at=0, tokens=9,
                              losses=[(1, 2.5)], wall_s=1.0, episodes=len(demos), expert_success=1.0,
                              drill_steps=0, lookup_drill_steps=0, lm_steps=0, data={"examples": len(demos)})
    record.write(tmp_path / "bc.json")
    assert finished_bc(tmp_path, CI) == record
    changed = params_from_dict({**CI.model_dump(), "warmstart": {**CI.warmstart.model_dump(), "steps": 99}})
    assert finished_bc(tmp_path, changed) is None
    bigger_eval = params_from_dict({**CI.model_dump(), "warmstart": {**CI.warmstart.model_dump(), "eval_episodes": 99,
                                                                     "ground_truth_episodes": 99}})
    assert finished_bc(tmp_path, bigger_eval) == record
    elsewhere = params_from_dict({**CI.model_dump(), "warmstart": {**CI.warmstart.model_dump(), "out_dir": "x/y"}})
    assert finished_bc(tmp_path, elsewhere) == record
    (tmp_path / "bc.json").write_text(json.dumps({**record.to_dict(), "steps": "many"}))
    with pytest.raises(ValueError, match="bc.json: steps"):
        finished_bc(tmp_path, CI)
    record.write(tmp_path / "bc.json")
    (tmp_path / "checkpoint" / "config.json").unlink()
    assert finished_bc(tmp_path, CI) is None  # no checkpoint saved
    (tmp_path / "checkpoint" / "adapter_config.json").write_text("{}")
    assert finished_bc(tmp_path, CI) == record  # a LoRA warm start saves its adapter alone


@pytest.fixture(scope="module")
def shipped_ci(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished tiny (ci) warm start, shipped the way `make warmstart` ships the organism's."""
    from intraskill.organism.shipped import ship_warmstart
    from intraskill.organism.warmstart import run_warmstart

    work = tmp_path_factory.mktemp("warmstart")
    run_warmstart(CI, out_dir=work / "run", progress=False)
    return ship_warmstart(work / "run", work / "shipped")


@pytest.mark.e2e
def test_shipped_checkpoint_matches_its_manifest(shipped_ci: Path) -> None:
    assert verify_shipped(shipped_ci) == []
    manifest = json.loads((shipped_ci / "manifest.json").read_text())
    assert WarmstartManifest.read(shipped_ci / "manifest.json").to_dict() == manifest
    assert manifest["bank_sha256"] == load_skillbank(S0_PATH).sha256
    assert manifest["params"]["warmstart"] == CI.warmstart.model_dump(mode="json")
    weights = shipped_ci / "checkpoint" / "model.safetensors"
    assert weights.stat().st_size <= 10 * 2**20
    weights.write_bytes(weights.read_bytes()[:-8] + b"\0" * 8)
    assert any("model.safetensors" in problem for problem in verify_shipped(shipped_ci))


@pytest.mark.e2e
def test_a_warm_start_is_reused_only_with_the_same_tokenizer_split(shipped_ci: Path, tmp_path: Path) -> None:
    import shutil

    assert warmstart_matches(shipped_ci, CI)
    copy = shutil.copytree(shipped_ci, tmp_path / "copy")
    saved = json.loads((copy / "checkpoint" / "tokenizer.json").read_text())
    saved["pre_tokenizer"]["pretokenizers"][-1]["use_regex"] = False  # the earlier split: isolated spaces
    (copy / "checkpoint" / "tokenizer.json").write_text(json.dumps(saved))
    assert not warmstart_matches(copy, CI)
    changed = params_from_dict({**CI.model_dump(), "warmstart": {**CI.warmstart.model_dump(), "steps": 99}})
    assert not warmstart_matches(shipped_ci, changed)
    # evaluation settings and the output location do not change the model: the warm start is reused
    moved = params_from_dict({**CI.model_dump(), "warmstart": {**CI.warmstart.model_dump(), "out_dir": "x/y",
                                                                "eval_episodes": 7}})
    assert warmstart_matches(shipped_ci, moved)


@pytest.mark.parametrize("params_file", ["organism.yaml", "organism_additive.yaml"])
def test_a_shipped_organism_matches_its_manifest(params_file: str) -> None:
    shipped = ROOT / "params" / params_file.replace(".yaml", "_warmstart")
    assert (shipped / "checkpoint" / "model.safetensors").stat().st_size <= 10 * 2**20
    assert verify_shipped(shipped) == []
    manifest = json.loads((shipped / "manifest.json").read_text())
    params = load_params(ROOT / "params" / params_file)
    recorded = manifest["params"]["warmstart"]  # settings added since it was shipped are at their defaults
    assert recorded == params.warmstart.model_dump(include=set(recorded))
    assert warmstart_matches(shipped, params)  # `make round` reuses it instead of rebuilding
    assert ensure_warmstart(params) == shipped
    assert resolve_checkpoint(params) == (str(shipped / "checkpoint"), shipped)  # eval, round and gate alike


def test_checkpoint_null_without_a_matching_warm_start_is_refused(tmp_path: Path) -> None:
    data = CI.model_dump(mode="json")
    data["model"]["checkpoint"] = None
    data["experiment"]["run_root"] = str(tmp_path)  # an absolute out_dir lies inside the run root
    data["warmstart"]["out_dir"] = str(tmp_path / "none")
    params = params_from_dict(data)
    with pytest.raises(MissingWarmstartError, match=r"intraskill warmstart --params params/ci\.yaml"):
        resolve_checkpoint(params, "params/ci.yaml")
    assert resolve_checkpoint(CI) == (None, None)  # ci.yaml asks for the untrained organism by name
    data["model"]["checkpoint"] = str(tmp_path)
    assert resolve_checkpoint(params_from_dict(data)) == (str(tmp_path), None)
    data["model"].update(spec="smollm2", checkpoint="untrained")
    with pytest.raises(ParamsError, match="model"):
        params_from_dict(data)


@pytest.mark.e2e
def test_ground_truth_schema(shipped_ci: Path) -> None:
    truth = read_ground_truth(shipped_ci)
    assert truth.schema_version == GROUND_TRUTH_SCHEMA_VERSION and truth.metric == "r_success"
    bank = load_skillbank(S0_PATH)
    assert set(truth.chunks) == {s.skill_id for s in bank.enabled_skills()} and truth.bank_sha256 == bank.sha256
    for skill_id, entry in truth.chunks.items():
        low, high = entry.ci95
        assert low <= entry.effect <= high, skill_id
        assert entry.pairs == truth.episodes_per_arm
        assert entry.effect == pytest.approx(entry.alone_success - entry.bare_success)
        assert entry.role in ("helpful", "neutral", "harmful")


def test_copy_drills_repeat_a_span_of_distinct_random_tokens_after_a_variable_gap(tokenizer) -> None:
    tok, _ = tokenizer
    vocabulary = ordinary_tokens(tok)
    assert set(vocabulary).isdisjoint(tok.all_special_ids) and len(vocabulary) == len(tok) - len(tok.all_special_ids)
    drills = copy_drills(vocabulary, 200, seed=5)
    assert drills == copy_drills(vocabulary, 200, seed=5) and drills != copy_drills(vocabulary, 200, seed=6)
    gaps = set()
    for drill in drills:
        copied = sum(drill.loss_mask) + 1
        span = drill.input_ids[:copied]
        assert SPAN[0] <= copied <= SPAN[1] and set(drill.input_ids) <= set(vocabulary)
        assert drill.input_ids[-copied:] == span and len(set(span)) == len(span)
        assert drill.loss_mask[-copied] == 0 and all(drill.loss_mask[-copied + 1:])
        assert not any(drill.loss_mask[:-copied])
        gaps.add(len(drill.input_ids) - 2 * copied)
    assert min(gaps) >= FILLER[0] and max(gaps) <= FILLER[1] and len(gaps) > 20
    with pytest.raises(ValueError, match="token_ids"):
        copy_drills(range(5), 1, seed=0)


def test_lookup_drills_answer_with_the_value_after_the_key_or_none(tokenizer) -> None:
    from intraskill.organism.drills import AROUND, KEY_TOKENS, lookup_drills

    vocabulary = ordinary_tokens(tokenizer[0])
    drills = lookup_drills(vocabulary, 300, seed=5)
    assert drills == lookup_drills(vocabulary, 300, seed=5) and drills != lookup_drills(vocabulary, 300, seed=6)
    answered, nones = 0, set()
    for drill in drills:
        ids = drill.input_ids
        assert drill.loss_mask == [0] * (len(ids) - 1) + [1] and set(ids) <= set(vocabulary)
        body, query, answer = ids[:-KEY_TOKENS - 2], ids[-KEY_TOKENS - 2:-2], ids[-1]
        at = [i for i in range(len(body)) if body[i:i + KEY_TOKENS] == query]
        if answer in body:  # the value ending the line that names the key: right after it or a few tokens on
            answered += 1
            assert len(at) == 1
            after = body[at[0] + KEY_TOKENS:at[0] + KEY_TOKENS + AROUND[1] + 1]
            assert answer in after
        else:  # the drills' one "none" token, never on a line
            assert answer not in body
            nones.add(answer)
    assert 100 < answered < 200 and len(nones) == 1
    with pytest.raises(ValueError, match="token_ids"):
        lookup_drills(range(20), 1, seed=0)


def test_behaviour_clone_adds_the_lookup_phase_to_its_steps(tokenizer) -> None:
    from intraskill.organism.cloning import BCExample, behaviour_clone
    from intraskill.policy.organism import OrganismConfig, build_organism

    tok = tokenizer[0]
    model = build_organism(OrganismConfig(vocab_size=len(tok), hidden_size=32, num_layers=1, num_heads=2,
                                          num_kv_heads=1, head_dim=16, intermediate_size=64, max_position=64,
                                          seed=1), tok)
    example = BCExample(list(range(2, 12)), [0] * 5 + [1] * 5)
    with pytest.raises(ValueError, match="lookup_steps"):
        behaviour_clone(model, [example], steps=1, lr=1e-3, warmup_steps=0, lr_min_ratio=1.0, weight_decay=0.0,
                        grad_clip=1.0, batch_tokens=64, pad_id=0, seed=1, lookup_steps=1, progress=False)
    result = behaviour_clone(model, [example], steps=2, lr=1e-3, warmup_steps=0, lr_min_ratio=1.0, weight_decay=0.0,
                             grad_clip=1.0, batch_tokens=64, pad_id=0, seed=1, drills=[example], drill_steps=1,
                             lookups=[example], lookup_steps=3, progress=False)
    assert result.steps == 6


def test_warmstart_checks_read_the_targets() -> None:
    from intraskill.organism.truth import warmstart_checks

    manifest = WarmstartManifest.read(ROOT / "params" / "organism_warmstart" / "manifest.json")
    shipped = read_ground_truth(ROOT / "params" / "organism_warmstart")
    arm = manifest.metrics.bare.model_copy(update={"success": 0.4, "protocol_error_rate": 0.01})
    metrics = WarmstartMetrics(split="val", bare=arm, s0=arm.model_copy(update={"protocol_error_rate": 0.04}),
                               alone={"a": arm, "b": arm, "n": arm}, eval_wall_s={})
    chunk = next(iter(shipped.chunks.values()))

    def truth(**chunks: tuple[float, tuple[float, float], str]) -> GroundTruth:
        return shipped.model_copy(update={"chunks": {
            name: chunk.model_copy(update={"effect": effect, "ci95": ci95, "role": role})
            for name, (effect, ci95, role) in chunks.items()}})

    checks = warmstart_checks(metrics, truth(a=(0.1, (0.02, 0.2), "helpful"), b=(0.03, (0.01, 0.05), "harmful"),
                                             n=(0.03, (0.01, 0.05), "neutral")))
    assert all(getattr(checks, name).met for name in WarmstartChecks.model_fields)
    assert checks.protocol_errors.value == 0.04 and checks.chunk_use.value == ["a", "b", "n"]
    assert checks.content_use.value == ["a"]
    erring = arm.model_copy(update={"protocol_error_rate": 0.2})
    worse = metrics.model_copy(update={"bare": arm.model_copy(update={"success": 0.0}),
                                       "alone": {**metrics.alone, "b": erring}})
    checks = warmstart_checks(worse, truth(a=(0.04, (-0.01, 0.2), "helpful"), b=(0.03, (-0.01, 0.05), "harmful"),
                                           n=(0.03, (-0.01, 0.05), "neutral")))
    assert not any(getattr(checks, name).met for name in WarmstartChecks.model_fields)


def test_dropping_a_chunk_gives_the_prompt_the_runtime_renders_without_it(engine) -> None:
    """``drop_chunk`` on a played prompt (skill block and hints line) equals the first prompt of the same
    task played without it; later prompts lose the title from their hints lines, replies are kept."""
    from intraskill.agent.runtime import EpisodeJob
    from intraskill.agent.views import view_hints, view_skills

    bank = load_skillbank(S0_PATH)
    skills = bank.enabled_skills()
    task = engine.train_ids[0]
    sets = {"three": skills[:3], "two": [skills[0], skills[2]], "one": skills[1:2], "none": []}
    jobs = [EpisodeJob.create(task, sample, 3, tuple(chosen)) for sample, chosen in enumerate(sets.values())]
    demos = collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, s0_law(bank, _uniform(1.0),
                                   _uniform(0.0)), seed=3, max_turns=30, max_actions=30, view="compact_hints",
                                   progress=False)
    played = dict(zip(sets, demos))
    first = {name: demo.segments[0][0] for name, demo in played.items()}
    three, one = view_skills(sets["three"], "compact_hints"), view_skills(sets["one"], "compact_hints")
    title = view_hints(one, "compact_hints")[0]
    dropped = drop_chunk(played["three"].segments, three, skills[1].skill_id, view="compact_hints")
    assert dropped[0][0] == first["two"] and len(dropped) == len(played["three"].segments) > 1
    assert [reply for _, reply in dropped] == [reply for _, reply in played["three"].segments]
    assert all(title in prompt for prompt, _ in played["three"].segments)
    assert not any(title in prompt for prompt, _ in dropped)
    alone = drop_chunk(played["one"].segments, one, skills[1].skill_id, view="compact_hints")
    assert alone[0][0] == first["none"] and not any("Hints: " in prompt for prompt, _ in alone)
    with pytest.raises(ValueError, match="chunk_id"):
        drop_chunk(played["two"].segments, view_skills(sets["two"], "compact_hints"), skills[1].skill_id)
    with pytest.raises(ValueError, match="skill block"):
        drop_chunk(played["none"].segments, three, skills[1].skill_id)


def test_plan_demonstrations_think_their_competences_and_act_alike(engine) -> None:
    """With ``plan`` every reply opens with the episode's plan as ``<think>`` reasoning, the same plan on
    every turn; actions and rewards are those of the expert without it."""
    from intraskill.agent.runtime import EpisodeJob
    from intraskill.policy.expert_policy import PLAN_WORDS, plan_line

    bank = load_skillbank(S0_PATH)
    law = s0_law(bank, _uniform(0.5), _uniform(0.5))
    jobs = [EpisodeJob.create(task, 0, 7, tuple(bank.enabled_skills()[:2])) for task in engine.train_ids[:6]]
    played = {plan: collect_demonstrations(lambda: InProcessEnvironment(engine), jobs, law, seed=7,
                                           max_turns=30, max_actions=30, view="compact", plan=plan,
                                           progress=False) for plan in (False, True)}
    plans = set()
    for bare, planned in zip(played[False], played[True]):
        assert bare.reward == planned.reward and len(bare.segments) == len(planned.segments) > 1
        lines = {reply.split("</think>\n", 1)[0] for _, reply in planned.segments}
        assert len(lines) == 1 and next(iter(lines)).startswith("<think>Plan: ")
        for (_, reply), (_, planned_reply) in zip(bare.segments, planned.segments):
            assert planned_reply.split("</think>\n", 1)[1] == reply
        plans |= lines
    assert len(plans) > 1  # the draws differ between episodes, and the plan says so
    assert plan_line(tuple(PLAN_WORDS)) == "Plan: profile, refine, compare, page, options, budget"
    assert plan_line((), "zh") == "计划：无"


@pytest.mark.e2e
def test_a_manifest_without_a_later_setting_matches_its_default(shipped_ci: Path, tmp_path: Path) -> None:
    import shutil

    copy = shutil.copytree(shipped_ci, tmp_path / "older")
    manifest = json.loads((copy / "manifest.json").read_text())
    del manifest["params"]["warmstart"]["plan"]
    (copy / "manifest.json").write_text(json.dumps(manifest))
    assert warmstart_matches(copy, CI)
    planned = params_from_dict({**CI.model_dump(), "warmstart": {**CI.warmstart.model_dump(), "plan": True}})
    assert not warmstart_matches(copy, planned)


@pytest.mark.e2e
def test_title_sensitivity_is_the_mean_log_likelihood_drop(tokenizer) -> None:
    import torch

    from intraskill.agent.views import view_skills
    from intraskill.policy.organism import OrganismConfig, build_organism

    tok, _ = tokenizer
    bank = load_skillbank(S0_PATH)
    skills = bank.enabled_skills()
    model = build_organism(OrganismConfig(vocab_size=600, hidden_size=32, num_layers=1, num_heads=2,
                                          num_kv_heads=1, head_dim=16, intermediate_size=64,
                                          max_position=16384, initializer_range=0.3, seed=2), tok)
    engine_demos = tokenizer[1]
    demos = [d for d in engine_demos if d.skill_ids][:3]
    assert demos
    result = {r.chunk_id: r for r in title_sensitivity(model, tok, demos, skills, "standard", progress=False)}
    assert list(result) == [s.skill_id for s in skills]
    for skill in skills:
        showing = [d for d in demos if skill.skill_id in d.skill_ids]
        assert result[skill.skill_id].demos == len(showing)
        if not showing:
            assert math.isnan(result[skill.skill_id].mean_nats)
            continue
        deltas = []
        for demo in showing:
            ids, mask = tokenize_demonstration(demo.segments, tok)
            with torch.no_grad():  # reply_logprob is minus the BC loss's sum
                total = -float(bc_loss(model, *collate([BCExample(ids, mask)], 0))) * (sum(mask) - mask[0])
            assert reply_logprob(model, ids, mask) == pytest.approx(total, rel=1e-4)
            shown = view_skills([s for s in skills if s.skill_id in demo.skill_ids], "standard")
            dropped = drop_chunk(demo.segments, shown, skill.skill_id)
            deltas.append(total - reply_logprob(model, *tokenize_demonstration(dropped, tok)))
        assert result[skill.skill_id].mean_nats == pytest.approx(sum(deltas) / len(deltas), abs=1e-3)
        assert any(abs(d) > 1e-3 for d in deltas)  # a random model still reads the block


@pytest.mark.e2e
def test_a_pretrained_spec_is_cloned_with_lora_and_ships_its_adapter(tmp_path: Path) -> None:
    from intraskill.organism.shipped import ship_warmstart
    from intraskill.organism.warmstart import run_warmstart
    from intraskill.policy.factory import load_model, random_organism
    from intraskill.policy.organism import OrganismConfig

    pretrained = tmp_path / "pretrained"  # stands for smollm2: a model directory with its own weights
    data = CI.model_dump()
    data["model"]["organism"]["max_position"] = 32768  # standard-view demonstrations in a protocol-corpus BPE
    model, tokenizer = random_organism(OrganismConfig(**data["model"]["organism"]))
    model.save_pretrained(str(pretrained))
    tokenizer.save_pretrained(str(pretrained))
    data["model"].update(spec=str(pretrained), checkpoint=None)
    data["warmstart"].update(demos=4, steps=2, warmup_steps=1, lora={"rank": 4}, eval_episodes=2,
                             ground_truth_episodes=0)
    params = params_from_dict(data)
    manifest = run_warmstart(params, out_dir=tmp_path / "run", progress=False)
    assert manifest.bc["steps"] == 2 and manifest.bc["drill_steps"] == manifest.bc["lm_steps"] == 0
    assert manifest.demos["trained_parameters"] < manifest.demos["parameters"]  # the adapters alone
    assert manifest.metrics.alone == {} and manifest.metrics.bare.episodes == 2
    shipped = ship_warmstart(tmp_path / "run", tmp_path / "shipped")
    assert verify_shipped(shipped) == []
    names = {p.name for p in (shipped / "checkpoint").iterdir()}
    assert "adapter_config.json" in names and "model.safetensors" not in names
    assert "tokenizer.json" not in names and "README.md" not in names  # the spec brings its tokenizer
    merged, _, _, checkpoint_id = load_model(str(pretrained), checkpoint=str(shipped / "checkpoint"))
    assert checkpoint_id == manifest.checkpoint_sha256
    assert not warmstart_matches(shipped, params)  # never taken for an organism's warm start
    with pytest.raises(ParamsError, match="warmstart.lora"):
        params_from_dict({**data, "model": {**data["model"], "spec": "organism"}})


@pytest.mark.e2e
def test_a_killed_warm_start_evaluation_resumes_from_its_recorded_episodes(
        shipped_ci: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm start's evaluation keeps every episode (``evaluation.jsonl``, one key per arm): killed after its
    first arm and mid-line, it plays only the other arms' episodes and gives the same ground truth; run again,
    it plays none."""
    from intraskill.organism import truth as truth_module
    from intraskill.organism.truth import measure_ground_truth
    from intraskill.shop.build import open_engine

    run, bank = shipped_ci.parent / "run", load_skillbank(S0_PATH)
    lines = WarmstartDir(run).evaluation.read_text(encoding="utf-8").splitlines()
    keys = list(dict.fromkeys(json.loads(line)["key"] for line in lines))
    assert len(keys) == 2 + len(bank.enabled_skills())  # bare, S₀ and each chunk alone
    first = [line for line in lines if json.loads(line)["key"] == keys[0]]
    out = tmp_path / "resumed"
    out.mkdir()
    WarmstartDir(out).evaluation.write_text("".join(f"{line}\n" for line in first) + lines[len(first)][:40])
    played: list[object] = []
    real = truth_module.run_episodes
    monkeypatch.setattr(truth_module, "run_episodes", lambda policy, factory, jobs, *args, **kwargs: (
        played.extend(jobs), real(policy, factory, jobs, *args, **kwargs))[1])
    store = open_engine(CI.store, "train", run_root=CI.experiment.run_root)
    try:
        metrics, _ = measure_ground_truth(CI, run / "checkpoint", out, bank, store, progress=False)
        assert len(played) == len(lines) - len(first)
        recorded = WarmstartManifest.read(run / "manifest.json").metrics
        assert (metrics.bare, metrics.s0, metrics.alone) == (recorded.bare, recorded.s0, recorded.alone)
        assert json.loads((out / "ground_truth.json").read_text()) == json.loads((run / "ground_truth.json").read_text())
        played.clear()
        measure_ground_truth(CI, run / "checkpoint", out, bank, store, progress=False)
        assert played == []
    finally:
        store.close()
