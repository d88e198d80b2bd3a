"""The synthetic catalogue: determinism, raw schema, domains, price axes, budgets and near misses."""

from __future__ import annotations

from collections import defaultdict

import pytest

from intraskill.hashing import sha256_json
from intraskill.shop.data import get_goals, load_products
from intraskill.shop.price import price_affecting_axes
from intraskill.shop.reward import score_purchase
from intraskill.shop.synth import DISTRACTOR_ROLES, generate_raw_products, scale_spec
from intraskill.shop.types import CATEGORY_SEPARATOR, Goal, Product

PRODUCT_FIELDS = {"asin", "tag", "domain_zh", "domain_en_short", "domain_en_long", "title", "sub_title", "shop_name",
                  "category", "product_category", "attribute", "customization_options", "pricing", "images",
                  "full_description", "instructions"}
INSTRUCTION_FIELDS = {"instruction", "instruction_simple", "attributes", "instruction_options", "options",
                      "worker_id", "task_id", "task_uid", "instruction_index", "price_upper"}
PERSONA_KEYS = {"user_id", "registered", "region", "demographics", "behaviour", "transactions", "preferences"}


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return generate_raw_products("small", seed=5)


@pytest.fixture(scope="module")
def products(records: list[dict]) -> dict[str, Product]:
    return load_products(records)


@pytest.fixture(scope="module")
def goals(records: list[dict]) -> dict[int, Goal]:
    return get_goals(records)


def test_same_seed_same_catalogue(records: list[dict]) -> None:
    assert sha256_json(generate_raw_products("small", seed=5)) == sha256_json(records)
    assert sha256_json(generate_raw_products("small", seed=6)) != sha256_json(records)


def test_raw_schema_fields(records: list[dict]) -> None:
    spec = scale_spec("small")
    assert len(records) == spec.n_tasks * (1 + len(DISTRACTOR_ROLES))
    assert len({r["asin"] for r in records}) == len(records)
    for record in records:
        assert PRODUCT_FIELDS <= set(record)
        assert record["asin"].isdigit() and len(record["asin"]) == 10
        assert record["full_description"] == record["title"]
        assert len(record["pricing"]) in (1, 2)
        for entries in record["customization_options"].values():
            assert all({"value", "price", "image"} <= set(e) for e in entries)
        if record["instructions"]:
            (instruction,) = record["instructions"]
            assert INSTRUCTION_FIELDS <= set(instruction)
            assert instruction["task_id"] == records.index(record)
            assert PERSONA_KEYS <= set(record["user_persona"])
        else:
            assert "user_persona" not in record


def test_domains_and_three_level_paths(products: dict[str, Product]) -> None:
    assert len({p.domain for p in products.values()}) >= 8
    assert all(len(p.category_path) == 3 and CATEGORY_SEPARATOR in p.category for p in products.values())


def test_at_most_one_price_affecting_axis(products: dict[str, Product]) -> None:
    counts = [len(price_affecting_axes(p)) for p in products.values()]
    assert max(counts) == 1 and 0 in counts  # colour-only products have none


def test_default_scale_size() -> None:
    spec = scale_spec("default")
    assert spec.n_tasks * (1 + len(DISTRACTOR_ROLES)) >= 20_000
    assert (spec.train_size, spec.val_size, spec.test_size) == (3726, 400, 400)


def test_instructions_are_short_and_persona_carries_the_rest(goals: dict[int, Goal]) -> None:
    lengths = [len(g.instruction_simple) for g in goals.values()]
    assert 25 <= sum(lengths) / len(lengths) <= 45
    for goal in goals.values():
        prefs = goal.user_persona["preferences"]
        feature, type_name, brand, material = goal.attributes
        assert goal.instruction_simple.startswith(("a ", "an ")) and type_name in goal.instruction_simple
        assert brand not in goal.instruction_simple and material not in goal.instruction_simple.split()
        assert (prefs["brand"], prefs["material"]) == (brand, material)
        assert prefs["color"] == goal.goal_options[0]
        assert len(goal.goal_options) == 1 or prefs["size"] == goal.goal_options[1]
    kinds = {g.budget_kind for g in goals.values()}
    assert kinds == {"hard_upper", "approximate_upper", "no_budget"}


def _buy(product: Product, goal: Goal) -> dict:
    """Score buying ``product`` with the goal's option values where offered (else the first value)."""
    selected = {}
    for axis, values in product.options.items():
        wanted = [v for v in values if v in goal.goal_options]
        selected[axis] = wanted[0] if wanted else values[0]
    return score_purchase(product, selected, None, goal).to_dict()


def test_gold_solvable_and_every_target_has_near_misses(products: dict[str, Product], goals: dict[int, Goal]) -> None:
    by_type: dict[str, list[Product]] = defaultdict(list)
    for product in products.values():
        by_type[product.product_category].append(product)
    for goal in goals.values():
        gold = products[goal.asin]
        assert _buy(gold, goal)["r_success"] == 1
        failing = defaultdict(int)
        for other in by_type[gold.product_category]:
            if other.asin == goal.asin:
                continue
            detail = _buy(other, goal)
            if detail["r_success"]:
                continue
            missing = [k for k in ("r_att", "r_option", "r_price") if detail[k] < 1]
            if detail["r_type"] == 1 and len(missing) == 1:
                failing[missing[0]] += 1
        assert failing["r_att"] >= 2 and failing["r_option"] >= 1, (goal.task_id, dict(failing))
        if goal.price_upper is not None:
            assert failing["r_price"] >= 1, (goal.task_id, dict(failing))


def test_goal_variant_in_budget_and_a_larger_one_over(products: dict[str, Product], goals: dict[int, Goal]) -> None:
    checked = 0
    for goal in goals.values():
        gold = products[goal.asin]
        if goal.price_upper is None or "size" not in gold.options:
            continue
        prices = gold.option_prices["size"]
        size = goal.goal_options[1]
        assert prices[size] <= goal.price_upper
        assert gold.options["size"][0] != size and gold.options["color"][0] != goal.goal_options[0]
        larger = list(prices.values())[list(prices).index(size) + 1 :]
        assert all(p > goal.price_upper for p in larger)
        checked += 1
    assert checked > 100


def test_word_classes_are_disjoint_within_a_subcategory() -> None:
    """No material, feature or brand is a substring of another title word of its subcategory, so a
    distractor with another material/brand never satisfies the goal's attribute by substring."""
    from intraskill.shop import vocab

    for index, domain in enumerate(vocab.DOMAINS):
        brands = [b.casefold() for b in vocab.domain_brands(index)]
        for sub in domain.subcategories:
            classes = {"material": list(sub.materials), "feature": list(sub.features), "brand": brands,
                       "type": [t.name for t in sub.types], "color": list(domain.colors), "size": list(domain.sizes)}
            for name in ("material", "feature", "brand"):
                for word in classes[name]:
                    others = [w for k, ws in classes.items() for w in ws if w != word and k in ("material", "feature",
                                                                                             "brand", "type")]
                    assert not [w for w in others if word in w], (sub.name, word)
                    assert all(word not in w for k in ("color", "size") for w in classes[k]), (sub.name, word)


def test_env_build_command_reuses_the_store(small_store_root) -> None:
    import json

    from typer.testing import CliRunner

    from intraskill.cli import app

    manifest = json.loads((small_store_root / "manifest.json").read_text(encoding="utf-8"))
    result = CliRunner().invoke(app, ["env", "build", "--root", str(small_store_root), "--allow-outside-run-root", "--scale", "small",
                                      "--seed", str(manifest["seed"]), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["reused"] is True and summary["counts"]["products"] == 1000
    assert set(summary["split_sha256"]) == {"train", "val", "test", "dev"}
