"""Parameter files derive from a base: ``base: <file>`` plus an overlay, deep-merged along the sections."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.hashing import sha256_json
from intraskill.params import ParamsError, load_params, with_overrides

PARAMS = Path(__file__).resolve().parents[1] / "params"

RESOLVED_SHA256 = {
    "ci.yaml": "864888094d85b9e24451cfa9c85534073e523b728252467b7e3111b4bfc53095",
    "organism.yaml": "3a69cf590aa20942f46f55efd8a8ebcbf3c6cc69f16fc7a6c370d33f9013a6ba",
    "organism_additive.yaml": "39ceedf6eea5b00f8a277fdeb95debe17a402f90d15f6b4f01abf6bd97f8e63c",
    "organism_interaction.yaml": "cdabe2d64329d2a4055c276d882fc88e1899ad682ab5c2a9aa5b10f8673cda67",
    "organism_reader.yaml": "0acf6b8aa913492f79759093a6a0f97dd64c42bf14e05f33b4c998e651c43b85",
    "organism_skill1.yaml": "a5a2b5480bd29d87e5b40842727799bac2c8227d4e452eed6926767e93f03eaf",
    "qwen35_4b.yaml": "80fc5da09bb88ed01dfccf4909aba6a1ca711471f9f7c7867e4958a7b21774a6",
    "smollm2.yaml": "4d76737768ade1c302025615a209ff5a343c42e532b79b1e981b68fd6272b0ad",
    "smollm2_smoke.yaml": "79ba41ca106561f5a3700c4780134743604317b6970180b18f2ffa35269b68a4",
}
"""SHA-256 of the canonical JSON of each shipped set's ``model_dump(mode="json")``, taken from the files as they
were (every value written out) before they were rewritten as overlays on a base: the rewrite changed no validated
parameter, so no plan fingerprint and no warm-start manifest match changed. A deliberate change to a shipped set
updates its line here."""


def test_every_shipped_set_is_listed() -> None:
    assert sorted(RESOLVED_SHA256) == sorted(path.name for path in PARAMS.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(RESOLVED_SHA256))
def test_shipped_sets_resolve_to_their_frozen_parameters(name: str) -> None:
    assert sha256_json(load_params(PARAMS / name).model_dump(mode="json")) == RESOLVED_SHA256[name]


def test_variants_hold_only_their_differences() -> None:
    assert sum("q: 0.20" in path.read_text(encoding="utf-8") for path in PARAMS.glob("*.yaml")) == 1
    for name in ("organism_additive", "organism_interaction", "organism_reader", "organism_skill1", "smollm2_smoke"):
        text = (PARAMS / f"{name}.yaml").read_text(encoding="utf-8")
        assert text.count("\nbase: ") == 1 and "vocab_size" not in text and "bootstrap_samples" not in text, name


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


BASE = """experiment: {name: base, seed: 5}
model:
  organism: {hidden_size: 128, num_heads: 4}
  checkpoint: untrained
warmstart:
  p_with: {read_persona: 0.9}
  p_without: {read_persona: 0.1}
grpo: {lora: {rank: 8}, betas: [0.5, 0.6]}
matrix: {seeds: 5}
"""


def test_sections_merge_and_values_replace(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", BASE)
    path = _write(tmp_path, "child.yaml", """base: base.yaml
experiment: {name: child}
model: {organism: {num_heads: 2}}
warmstart: {p_with: {page_on: 0.8}, p_without: {page_on: 0.2}}
grpo: {lora: {alpha: 4.0}, betas: [0.7, 0.8]}
matrix: !replace {rounds: 3}
""")
    params = load_params(path)
    assert (params.experiment.name, params.experiment.seed) == ("child", 5)
    assert (params.model.organism.hidden_size, params.model.organism.num_heads) == (128, 2)
    assert params.model.checkpoint == "untrained"
    assert params.warmstart.p_with == {"page_on": 0.8}  # a mapping value replaces the base's
    assert (params.grpo.lora.rank, params.grpo.lora.alpha, params.grpo.betas) == (8, 4.0, (0.7, 0.8))
    assert (params.matrix.seeds, params.matrix.rounds) == (3, 3)  # !replace: the section's defaults, not base's 5
    assert with_overrides(params, ["matrix.seeds=7"]).matrix.rounds == 3


def test_bases_chain(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", BASE)
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "sub", "middle.yaml", "base: ../base.yaml\nexperiment: {seed: 6}\n")
    params = load_params(_write(tmp_path, "top.yaml", "base: sub/middle.yaml\nexperiment: {name: top}\n"))
    assert (params.experiment.name, params.experiment.seed, params.matrix.seeds) == ("top", 6, 5)


@pytest.mark.parametrize("overlay, message", [
    ("base: base.yaml\nwarmstart: {weightz: {}}\n",
     r"^invalid parameters in .*child\.yaml \(base .*base\.yaml\):\n  warmstart\.weightz: Extra inputs are not "
     r"permitted \[.*child\.yaml\]$"),
    ("base: base.yaml\nmodel: {organism: {num_heads: 3}}\n", r"num_heads \(3\) .*\[.*child\.yaml\]"),
    ("base: base.yaml\ngrpo: {lora: {rank: 0}}\n", r"grpo\.lora\.rank: .*\[.*child\.yaml\]"),
    ("base: missing.yaml\n", r"^.*child\.yaml: base: no parameter file .*missing\.yaml$"),
    ("base: child.yaml\n", r"^.*child\.yaml: base: child\.yaml makes a cycle \(.*child\.yaml -> .*child\.yaml\)$"),
    ("base: 3\n", r"child\.yaml: base: expected the path of a parameter file, got 3$"),
    ("base: base.yaml\nmatrix: !replace [1]\n", r"child\.yaml:2:\d+: !replace tags a mapping"),
])
def test_bad_overlays_are_one_clear_error(tmp_path: Path, overlay: str, message: str) -> None:
    _write(tmp_path, "base.yaml", BASE)
    with pytest.raises(ParamsError, match=message):
        load_params(_write(tmp_path, "child.yaml", overlay))


def test_an_error_in_the_base_names_the_base(tmp_path: Path) -> None:
    _write(tmp_path, "base.yaml", BASE.replace("seeds: 5", "seedz: 5"))
    with pytest.raises(ParamsError, match=r"matrix\.seedz: Extra inputs are not permitted \[.*/base\.yaml\]"):
        load_params(_write(tmp_path, "child.yaml", "base: base.yaml\n"))


def test_a_cycle_through_two_files_is_refused(tmp_path: Path) -> None:
    _write(tmp_path, "a.yaml", "base: b.yaml\n")
    _write(tmp_path, "b.yaml", "base: a.yaml\n")
    with pytest.raises(ParamsError, match=r"b\.yaml: base: a\.yaml makes a cycle \(.*a\.yaml -> .*b\.yaml -> "
                                          r".*a\.yaml\)"):
        load_params(tmp_path / "a.yaml")


def test_params_show_prints_the_merged_set_with_overrides() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["params", "show", "--params", str(PARAMS / "organism_interaction.yaml"),
                                "--set", "round.q=0.3", "--json"])
    assert shown.exit_code == 0, shown.output
    expected = with_overrides(load_params(PARAMS / "organism_interaction.yaml"), ["round.q=0.3"])
    assert json.loads(shown.stdout) == expected.model_dump(mode="json")
    assert expected.warmstart.law == "additive" and expected.model.organism.hidden_size == 256
    text = runner.invoke(app, ["params", "show", "--params", str(PARAMS / "organism_additive.yaml")])
    assert "law: additive" in text.stdout and "  q: 0.2\n" in text.stdout
    bad = runner.invoke(app, ["params", "show", "--params", str(PARAMS / "organism.yaml"), "--set", "round.q=2"])
    assert bad.exit_code == 1 and bad.stderr.count("\n") == 1 and "round.q" in bad.stderr
