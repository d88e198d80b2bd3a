"""Parameter sets validate, and bad input names the offending field."""

from pathlib import Path

import pytest

from intraskill.params import ParamsError, load_params, params_from_dict, plan_dump, with_overrides

PARAMS = Path(__file__).resolve().parents[1] / "params"


SHIPPED = sorted(PARAMS.glob("*.yaml"))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_parameter_sets_validate(path: Path) -> None:
    params = load_params(path)
    assert params.experiment.name and not params.experiment.allow_outside_run_root


def test_release_protocol_sampling() -> None:
    params = load_params(PARAMS / "qwen35_4b.yaml")
    assert (params.sampling.temperature, params.sampling.top_p) == (0.6, 1.0)
    assert (params.sampling.max_tokens_per_turn, params.sampling.max_turns) == (4096, 30)


def test_errors_name_the_field() -> None:
    with pytest.raises(ParamsError) as error:
        params_from_dict({"experiment": {"name": "x"}, "sampling": {"top_p": 2.0, "temprature": 1}})
    message = str(error.value)
    assert "sampling.top_p" in message and "sampling.temprature" in message


def test_organism_shape_is_checked() -> None:
    with pytest.raises(ParamsError, match="num_heads"):
        params_from_dict({"experiment": {"name": "x"}, "model": {"organism": {"hidden_size": 100, "num_heads": 3}}})


def test_missing_file_is_reported(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="not found"):
        load_params(tmp_path / "nope.yaml")


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("text, message", [
    ("experiment:\n  name: a\n  name: b\n", r"p\.yaml:3:\d+: duplicate key 'name'"),
    ("experiment:\n\tname: a\n", r"p\.yaml:2:\d+: .*tab"),
    ("experiment: {name: [a\n", r"p\.yaml:\d+:\d+: "),
    ("experiment:\n  name: !shell a\n", r"p\.yaml:2:\d+: .*!shell"),
])
def test_yaml_errors_are_one_line_naming_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ParamsError, match=message) as error:
        load_params(_write(tmp_path, text))
    assert "\n" not in str(error.value)


def test_a_directory_is_not_a_parameter_file(tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="is a directory"):
        load_params(tmp_path)


@pytest.mark.parametrize("section, field, value", [
    ("round", "rollout_steps", True), ("round", "rollout_steps", "20"), ("grpo", "lr", "0.001"),
    ("round", "full_skill_retry", 1), ("grpo", "betas", ["0.9", 0.98]),
])
def test_types_are_strict(section: str, field: str, value: object) -> None:
    with pytest.raises(ParamsError, match=rf"{section}\.{field}"):
        params_from_dict({"experiment": {"name": "x"}, section: {field: value}})


def test_ints_are_numbers_and_yaml_1_2_floats_read_as_floats(tmp_path: Path) -> None:
    params = params_from_dict({"experiment": {"name": "x"}, "grpo": {"lr": 1, "betas": [0, 0.5]}})
    assert params.grpo.lr == 1.0 and params.grpo.betas == (0.0, 0.5)
    path = _write(tmp_path, "experiment: {name: x}\ngrpo: {lr: 1e-4, eps_high: 3E-1}\n")
    assert (load_params(path).grpo.lr, load_params(path).grpo.eps_high) == (1e-4, 0.3)
    assert with_overrides(load_params(path), ["grpo.lr=2e-5"]).grpo.lr == 2e-5


@pytest.mark.parametrize("experiment, field", [
    ({"name": "../escape"}, "experiment.name"), ({"name": "/abs/name"}, "experiment.name"),
    ({"name": "a/../../b"}, "experiment.name"), ({"name": "x", "run_root": "../runs"}, "experiment.run_root"),
])
def test_names_and_output_paths_stay_inside_the_run_root(experiment: dict, field: str) -> None:
    with pytest.raises(ParamsError, match=rf"{field}.*allow_outside_run_root"):
        params_from_dict({"experiment": experiment})
    allowed = params_from_dict({"experiment": {**experiment, "allow_outside_run_root": True}})
    assert allowed.experiment.allow_outside_run_root


@pytest.mark.parametrize("out_dir", ["../warmstart", "/elsewhere/warmstart"])
def test_warmstart_out_dir_stays_inside(out_dir: str, tmp_path: Path) -> None:
    with pytest.raises(ParamsError, match="warmstart.out_dir"):
        params_from_dict({"experiment": {"name": "x"}, "warmstart": {"out_dir": out_dir}})
    inside = {"experiment": {"name": "x", "run_root": str(tmp_path)}, "warmstart": {"out_dir": str(tmp_path / "w")}}
    assert params_from_dict(inside).warmstart.out_dir == str(tmp_path / "w")
    outside = {"experiment": {"name": "x", "allow_outside_run_root": True}, "warmstart": {"out_dir": out_dir}}
    assert params_from_dict(outside).warmstart.out_dir == out_dir


def test_an_absolute_run_root_is_the_users_choice(tmp_path: Path) -> None:
    params = params_from_dict({"experiment": {"name": "nested/run", "run_root": str(tmp_path)}})
    assert params.experiment.run_root == str(tmp_path)


def _float_fields() -> list[tuple[type, str, object]]:
    """Every float-holding field of every parameter section, with a non-finite value of its shape."""
    import typing

    import intraskill.params as module

    sections = [cls for cls in vars(module).values()
                if isinstance(cls, type) and issubclass(cls, module._Section) and cls is not module._Section]
    def holds_float(annotation: object) -> bool:
        return annotation is float or any(holds_float(arg) for arg in typing.get_args(annotation))

    found = []
    for section in sections:
        for name, field in section.model_fields.items():
            if not holds_float(field.annotation):
                continue
            shape = field.annotation
            origin = typing.get_origin(typing.get_args(shape)[0] if typing.get_origin(shape) is typing.Annotated
                                       else shape)
            value = ({"x": float("nan")} if origin is dict else [float("inf"), 0.5] if origin is tuple
                     else float("-inf"))
            found.append((section, name, value))
    return found


@pytest.mark.parametrize("section, field, value", _float_fields(),
                         ids=lambda item: getattr(item, "__name__", item) if not isinstance(item, list | dict) else "")
def test_every_float_parameter_refuses_non_finite_values(section: type, field: str, value: object) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        section.model_validate({field: value})
    assert any(error["loc"][0] == field and "finite number" in error["msg"] for error in caught.value.errors())


def test_a_non_finite_learning_rate_is_one_error_naming_the_field() -> None:
    base = params_from_dict({"experiment": {"name": "x"}})
    for text in (".inf", ".nan", "-.inf"):
        with pytest.raises(ParamsError, match=r"grpo\.lr: Input should be a finite number"):
            with_overrides(base, [f"grpo.lr={text}"])
    assert len(_float_fields()) >= 40  # the walk above finds the float fields


def test_gate_and_coevolve_sections_enter_plans_only_off_their_defaults() -> None:
    """``gate:`` and ``coevolve:`` are settable with ``--set`` and checked; at their defaults plans keep their
    fingerprints (the sections are left out), changed they enter the plan."""
    base = params_from_dict({"experiment": {"name": "g"}})
    assert "gate" not in plan_dump(base) and "coevolve" not in plan_dump(base)
    assert (base.gate.active_skill_budget, base.gate.samples_per_task, base.gate.mask_seed) == (10, 1, 20260901)
    assert base.coevolve.max_candidates == 6
    changed = with_overrides(base, ["gate.active_skill_budget=3", "coevolve.max_candidates=2"])
    assert plan_dump(changed)["gate"]["active_skill_budget"] == 3
    assert plan_dump(changed)["coevolve"] == {"max_candidates": 2}
    for bad in ("gate.samples_per_task=0", "coevolve.max_candidates=17", "gate.ranking_k=0"):
        with pytest.raises(ParamsError, match=bad.split("=")[0].split(".")[1]):
            with_overrides(base, [bad])
