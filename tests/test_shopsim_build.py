"""A store built from ShopSimulator's own files (``tests/fixtures/shopsimulator``, the published layout):
catalogue, tasks, split, search, a scripted-expert episode priced by SKU, clear errors for malformed files, and a
training round on it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from intraskill.cli import app as cli_app
from intraskill.hashing import sha256_file, sha256_json
from intraskill.params import load_params, params_from_dict, plan_dump
from intraskill.paths import project_root
from intraskill.shop.build import (
    StoreArtifacts,
    StoreIntegrityError,
    build_shopsimulator_store,
    build_store,
    default_store_root,
    open_store,
)
from intraskill.shop.data import read_raw_products, write_raw_products
from intraskill.shop.engine import ShopEngine
from intraskill.shop.scripted_expert import Competences, ScriptedExpert, run_expert_episode
from intraskill.shop.shopsim_files import CATALOG_FILE, SPLITS_FILE, ShopSimulatorDataError

FIXTURE = Path(__file__).parent / "fixtures" / "shopsimulator" / "shop_env"
CATALOG = FIXTURE / "data" / CATALOG_FILE
SPLITS = FIXTURE / "configs" / SPLITS_FILE
GOLD_WASHER = "747848614498"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> StoreArtifacts:
    return build_shopsimulator_store(tmp_path_factory.mktemp("shopsim-store"), FIXTURE)


@pytest.fixture(scope="module")
def engine(built: StoreArtifacts) -> Iterator[ShopEngine]:
    catalog, index, _ = open_store(built.paths.root)
    yield ShopEngine(catalog.products, catalog.goals, index)
    index.close()


def test_the_store_holds_the_published_catalogue_tasks_and_split(built: StoreArtifacts) -> None:
    manifest, catalog = built.manifest, built.catalog
    assert manifest["source"]["files"] == {"data/" + CATALOG_FILE: sha256_file(CATALOG),
                                           "configs/" + SPLITS_FILE: sha256_file(SPLITS)}
    assert manifest["counts"] == {"products": 17, "tasks": 16, "train_tasks": 7, "val_tasks": 2, "test_tasks": 2,
                                  "dev_tasks": 1}  # dev: carved from train (7 // 5), the published lists kept
    assert set(built.splits.ids("dev")) <= set(built.splits.ids("train"))
    published = json.loads(SPLITS.read_text(encoding="utf-8"))["splits"]
    for name in ("train", "val", "test"):
        assert list(built.splits.ids(name)) == published[name]["task_ids"]
        assert manifest["split_sha256"][name] == published[name]["sha256"]
    assert 2 not in catalog.goals and 12 not in catalog.goals  # an excluded product's gap; empty attributes
    washer = catalog.products[GOLD_WASHER]
    assert washer.title.startswith("智能热洗洗地机") and washer.brand == "清洁先锋旗舰店"
    assert washer.option_prices == {"颜色分类": {"黑色 | pro版": 2399.0, "白色 | 标准版": 1999.0}}
    budgets = {t: (g.price_upper, g.budget_kind) for t, g in catalog.goals.items()}
    assert budgets[0] == (2100.0, "hard_upper") and budgets[1] == (1760.0, "approximate_upper")
    assert budgets[10] == (None, "no_budget")
    assert budgets[4] == (500.0, "hard_upper")  # a standard task: null price_upper, the regex reads the text
    task = catalog.task(0)
    assert task.instruction_simple == "想要一台能热洗的智能洗地机，不超过2100元"
    assert "__reasoning__" not in task.user_persona and task.user_persona["地区信息"]["城市"] == "杭州"
    again = build_shopsimulator_store(built.paths.root, FIXTURE)
    assert again.reused and again.manifest == manifest


def test_search_ranks_the_gold_product_first_on_chinese_queries(engine: ShopEngine) -> None:
    index = engine.index
    for query, gold in (("想要一台能热洗的智能洗地机", GOLD_WASHER), ("带吸管的保温杯", "634029187745"),
                        ("防滑的瑜伽垫", "684415720093")):
        assert index.search(query, k=3, engine="fast")[0] == gold
        assert index.search(query, k=3, engine="fts5") == index.search(query, k=3, engine="fast")


@pytest.mark.parametrize(("task_id", "check_budget", "price", "success"), [
    (0, True, 1999.0, 1),    # 黑色/Pro版 2399 > 2100: the expert switches to 白色/标准版 1999
    (0, False, 2399.0, 0),   # bought over budget, and the wrong colour
    (6, True, 89.0, 1),      # 500ml 109 > 100: switches to 350ml 89
])
def test_a_scripted_expert_episode_is_priced_by_its_sku(built: StoreArtifacts, engine: ShopEngine, task_id: int,
                                                        check_budget: bool, price: float, success: int) -> None:
    competences = Competences(inspect_candidates=False, refine_query=False, page_on=False,
                              check_budget=check_budget)
    final = run_expert_episode(engine.new_session(), ScriptedExpert(competences),
                               built.catalog.task(task_id))
    detail = final["reward_detail"]
    assert final["termination_reason"] == "purchase"
    assert detail["price_resolution"]["price"] == price and detail["price_verifiable"]
    assert (detail["r_price"], detail["r_option"], detail["r_success"]) == (success, success, success)
    assert detail["r_type"] == 1.0 and detail["r_att"] == 1.0 and detail["target_asin_match"]


def _copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FIXTURE, tmp_path / "shop_env"))


def _edit_products(edit: Callable[[list[dict[str, Any]]], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        records = read_raw_products(root / "data" / CATALOG_FILE)
        edit(records)
        write_raw_products(records, root / "data" / CATALOG_FILE)
    return apply


def _edit_splits(edit: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def apply(root: Path) -> None:
        path = root / "configs" / SPLITS_FILE
        data = json.loads(path.read_text(encoding="utf-8"))
        edit(data)
        path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return apply


def _set_val(ids: list[int]) -> Callable[[dict[str, Any]], None]:
    def edit(data: dict[str, Any]) -> None:
        data["splits"]["val"] = {"task_ids": ids, "sha256": sha256_json(ids)}
    return edit


def _second_price_axis(records: list[dict[str, Any]]) -> None:
    records[0]["customization_options"]["尺寸"] = [{"value": "小", "price": 1.0}, {"value": "大", "price": 2.0}]


def _first_instruction(**changes: Any) -> Callable[[list[dict[str, Any]]], None]:
    def edit(records: list[dict[str, Any]]) -> None:
        instruction = records[0]["instructions"][0]
        for key, value in changes.items():
            if value is ...:
                del instruction[key]
            else:
                instruction[key] = value
    return edit


MALFORMED = {
    "no catalogue": (lambda root: (root / "data" / CATALOG_FILE).unlink(), CATALOG_FILE, "no " + CATALOG_FILE),
    "no split file": (lambda root: (root / "configs" / SPLITS_FILE).unlink(), SPLITS_FILE, "no " + SPLITS_FILE),
    "truncated gzip": (lambda root: (root / "data" / CATALOG_FILE).write_bytes(CATALOG.read_bytes()[:200]),
                       CATALOG_FILE, "truncated or corrupt"),
    "split not JSON": (lambda root: (root / "configs" / SPLITS_FILE).write_text("{\"splits\": [", encoding="utf-8"),
                       SPLITS_FILE, "not valid JSON"),
    "no title": (_edit_products(lambda r: r[0].pop("title")), CATALOG_FILE,
                 "products[0] (asin 747848614498).title: missing"),
    "duplicate ASIN": (_edit_products(lambda r: r[1].update(asin=GOLD_WASHER)), CATALOG_FILE,
                       "products[1].asin: 747848614498 repeats an earlier product"),
    "no task_id": (_edit_products(_first_instruction(task_id=...)), CATALOG_FILE,
                   "products[0] (asin 747848614498).instructions[0].task_id: missing"),
    "repeated task_id": (_edit_products(lambda r: r[1]["instructions"][0].update(task_id=0)), CATALOG_FILE,
                         "instructions[0].task_id: 0 is not unique"),
    "price_upper text": (_edit_products(_first_instruction(price_upper="2100元")), CATALOG_FILE,
                         "instructions[0].price_upper: expected int or float or null, got str"),
    "no price_upper": (_edit_products(_first_instruction(price_upper=...)), CATALOG_FILE,
                       "instructions[0].price_upper: missing"),
    "no instruction_simple": (_edit_products(_first_instruction(instruction_simple=...)), CATALOG_FILE,
                              "instructions[0].instruction_simple: missing"),
    "option price text": (_edit_products(lambda r: r[0]["customization_options"]["颜色分类"][0].update(price="贵")),
                          CATALOG_FILE, "customization_options['颜色分类'][0].price: expected int or float or null"),
    "two price axes": (_edit_products(_second_price_axis), CATALOG_FILE,
                       "customization_options: 2 price-affecting axes"),
    "attributes not a list": (_edit_products(_first_instruction(attributes="智能")), CATALOG_FILE,
                              "instructions[0].attributes: expected list, got str"),
    "task id text": (_edit_splits(lambda d: d["splits"]["val"]["task_ids"].append("9")), SPLITS_FILE,
                     "splits.val.task_ids[2]: expected an integer task id, got str"),
    "no test list": (_edit_splits(lambda d: d["splits"].pop("test")), SPLITS_FILE, "splits.test: missing"),
    "split hash": (_edit_splits(lambda d: d["splits"]["train"].update(sha256="0" * 64)), SPLITS_FILE,
                   "sha256.train does not match its task-id list"),
    "unknown task": (_edit_splits(_set_val([3, 99])), SPLITS_FILE,
                     "splits.val: task 99 is not an active task"),
    "inactive task": (_edit_splits(_set_val([3, 12])), SPLITS_FILE, "splits.val: task 12 is not an active task"),
    "standard task": (_edit_splits(_set_val([3, 4])), SPLITS_FILE, "splits.val: task 4 has no user_persona"),
    "task in two splits": (_edit_splits(_set_val([3, 0])), SPLITS_FILE, "task 0 is also in splits.val"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_are_refused_naming_file_and_field(tmp_path: Path, case: str) -> None:
    damage, file_name, message = MALFORMED[case]
    root = _copy(tmp_path)
    damage(root)
    with pytest.raises(ShopSimulatorDataError) as caught:
        build_shopsimulator_store(tmp_path / "store", root)
    text = str(caught.value)
    assert file_name in text and message in text and "\n" not in text
    assert not (tmp_path / "store" / "manifest.json").exists()


def test_cli_builds_from_the_files_and_fails_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(cli_app, ["env", "build", "--from-shopsimulator", str(FIXTURE), "--out",
                                 str(tmp_path / "store"), "--allow-outside-run-root", "--json"])
    assert ok.exit_code == 0, ok.output
    summary = json.loads(ok.stdout.strip().splitlines()[-1])
    assert summary["counts"]["test_tasks"] == 2 and summary["source"]["kind"] == "shopsimulator"
    broken = _copy(tmp_path)
    _edit_products(lambda r: r[3].pop("category"))(broken)
    bad = runner.invoke(cli_app, ["env", "build", "--from-shopsimulator", str(broken), "--out",
                                  str(tmp_path / "other"), "--allow-outside-run-root"])
    assert bad.exit_code == 1
    assert bad.stderr.strip().splitlines()[-1] == (
        f"error: {broken / 'data' / CATALOG_FILE}: products[3] (asin 603381920417).category: missing")


def test_a_synthetic_build_never_overwrites_a_store_built_from_files(built: StoreArtifacts) -> None:
    with pytest.raises(StoreIntegrityError, match="built from ShopSimulator files"):
        build_store(built.paths.root, scale="small", seed=11)
    assert json.loads(built.paths.manifest.read_text(encoding="utf-8")) == built.manifest


def test_store_source_is_left_out_of_dumps_until_set(tmp_path: Path) -> None:
    ci = load_params(project_root() / "params" / "ci.yaml")
    assert "source" not in plan_dump(ci)["store"] and "source" not in ci.store.model_dump()
    data = ci.model_dump(mode="json")
    data["store"]["source"] = str(FIXTURE)
    sourced = params_from_dict(data)
    assert plan_dump(sourced)["store"]["source"] == str(FIXTURE)
    roots = {default_store_root(p.store, tmp_path) for p in (ci, sourced)}
    assert roots == {tmp_path / "store" / "small-11",
                     default_store_root(sourced.store, tmp_path)} and len(roots) == 2
    assert default_store_root(sourced.store, tmp_path).name.startswith("shopsimulator-")


@pytest.mark.e2e
def test_a_training_round_runs_on_a_store_built_from_the_files(tmp_path: Path) -> None:
    from intraskill.pipeline.round import run_round

    data = load_params(project_root() / "params" / "ci.yaml").model_dump(mode="json")
    data["experiment"]["run_root"] = str(tmp_path)
    data["store"]["source"] = str(FIXTURE)
    data["round"].update(n_samples_per_prompt=2, rollout_batch_size=1, over_sampling_batch_size=2, rollout_steps=1,
                         val_tasks=2)
    data["sampling"]["max_tokens_per_turn"] = 16
    params = params_from_dict(data)
    result = run_round(params, 0, out_dir=tmp_path / "round", progress=False)
    assert [row.step for row in result.metrics] == [1]
    assert result.comparison is not None and result.comparison.metric("r_success").pairs == 2
    environment = json.loads((result.root / "plan.json").read_text(encoding="utf-8"))["environment"]
    assert environment["source"]["files"]["data/" + CATALOG_FILE] == sha256_file(CATALOG)
    assert "scale" not in environment
    assert (default_store_root(params.store, tmp_path) / "manifest.json").is_file()
