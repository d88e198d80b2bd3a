"""Parameter sets validate, and bad input names the offending field."""

from pathlib import Path

import pytest

from intraskill.params import ParamsError, load_params, params_from_dict

PARAMS = Path(__file__).resolve().parents[1] / "params"


@pytest.mark.parametrize("name", ["organism", "ci", "smollm2", "qwen35_4b"])
def test_shipped_parameter_sets_validate(name: str) -> None:
    params = load_params(PARAMS / f"{name}.yaml")
    assert params.experiment.name


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
