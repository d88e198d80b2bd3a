"""Run directories, stores and parameter files fail closed: a damaged file is named, never silently replaced."""

from __future__ import annotations

import ast
import gzip
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from intraskill.cli import app
from intraskill.jsonl import JsonlError, JsonlWriter, read_jsonl
from intraskill.shop.build import StoreIntegrityError, build_store, open_store
from intraskill.shop.data import read_raw_products


def test_a_corrupt_middle_line_names_its_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    path.write_text('{"a": 1}\n{"a": 2\n{"a": 3}\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=rf"{path}:2: "):
        read_jsonl(path)
    path.write_text('{"a": 1}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(JsonlError, match=rf"{path}:2: .*JSON object"):
        read_jsonl(path)


def test_a_torn_last_line_is_crash_recovery_unless_the_reader_is_strict(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    with JsonlWriter(path) as writer:
        writer.append({"a": 1})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"a": ')
    assert read_jsonl(path) == [{"a": 1}]
    with pytest.raises(JsonlError, match=rf"{path}:2: truncated or corrupt"):
        read_jsonl(path, torn_tail=False)


@pytest.fixture
def store_copy(small_store_root: Path, tmp_path: Path) -> Path:
    root = tmp_path / "store"
    shutil.copytree(small_store_root, root)
    return root


def test_the_manifest_records_the_index_checksum_and_a_tampered_index_is_refused(store_copy: Path) -> None:
    manifest = build_store(store_copy, scale="small", seed=11).manifest
    assert set(manifest["files"]) == {"products", "splits", "index"}
    with open(store_copy / "search.sqlite3", "r+b") as handle:
        handle.seek(-64, 2)
        handle.write(b"\0" * 64)
    with pytest.raises(StoreIntegrityError, match="search.sqlite3"):
        open_store(store_copy)
    with pytest.raises(StoreIntegrityError, match=r"search\.sqlite3.*--force"):
        build_store(store_copy, scale="small", seed=11)
    result = CliRunner().invoke(app, ["env", "build", "--root", str(store_copy), "--allow-outside-run-root", "--scale", "small", "--seed", "11"])
    assert result.exit_code == 1 and "search.sqlite3" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(app, ["env", "build", "--root", str(store_copy), "--allow-outside-run-root", "--scale", "small", "--seed", "11",
                                      "--force", "--json"])
    assert result.exit_code == 0, result.output
    assert '"reused": false' in result.output
    open_store(store_copy)[1].close()


def test_a_truncated_catalogue_names_the_file(store_copy: Path) -> None:
    products = store_copy / "products.json.gz"
    products.write_bytes(products.read_bytes()[:2000])
    with pytest.raises(ValueError, match=rf"{products}: truncated or corrupt"):
        read_raw_products(products)
    plain = store_copy / "products.json"
    plain.write_bytes(gzip.decompress(gzip.compress(b'[{"asin": "A1"}, {"asin": ')))
    with pytest.raises(ValueError, match=rf"{plain}: truncated or corrupt"):
        read_raw_products(plain)
    result = CliRunner().invoke(app, ["env", "build", "--root", str(store_copy), "--allow-outside-run-root", "--scale", "small", "--seed", "11"])
    assert result.exit_code == 1 and str(products) in result.output and "Aborted" not in result.output
    (store_copy / "manifest.json").unlink()
    with pytest.raises(FileNotFoundError, match="manifest"):
        open_store(store_copy)


@pytest.mark.parametrize("text, problem", [
    ("experiment:\n\tname: x\n", "p.yaml:2:1: "), ("experiment: {name: [x\n", "p.yaml:2:1: "),
    ("experiment:\n  name: !foo x\n", "p.yaml:2:9: "), ("experiment: {name: a, name: b}\n", "duplicate key"),
    (None, "is a directory"),
])
@pytest.mark.parametrize("verb", [["round"], ["eval", "--split", "val", "--skills", "none", "--out", "o"]])
def test_bad_parameter_files_are_one_line_in_every_verb(tmp_path: Path, text: str | None, problem: str,
                                                        verb: list[str]) -> None:
    path = tmp_path / "p.yaml"
    if text is None:
        path.mkdir()
    else:
        path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, [*verb, "--params", str(path)])
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and problem in lines[0], result.output


def test_tests_read_no_machine_path() -> None:
    """Tests reach files through fixtures, ``tmp_path`` or the project root, never a literal machine path."""
    prefixes = tuple(f"/{name}/" for name in ("work", "tmp", "home", "root", "Users", "mnt", "data", "opt"))
    found = [f"{path.name}:{node.lineno}: {node.value!r}" for path in sorted(Path(__file__).parent.rglob("*.py"))
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith(prefixes)]
    assert not found, found
