"""Cached entry points that build (or reuse) a store on disk: synthetic, or from ShopSimulator's own files.

``build_store(root, scale, seed)`` (the synthetic catalogue) and ``build_shopsimulator_store(root, source)`` (the
published files of a ShopSimulator directory, :mod:`intraskill.shop.shopsim_files`) write, under ``root``:

* ``products.json.gz`` — the raw product list (reference schema, deterministic gzip);
* ``splits.json`` — the group-disjoint train / val / test task-id lists with SHA-256s, and the ``dev`` list
  carved from train for probes and tuning (:func:`~intraskill.shop.splits.carve_dev`);
* ``search.sqlite3`` — the FTS5 BM25 index (:class:`intraskill.shop.search.SearchIndex`);
* ``manifest.json`` — generator version, scale and seed (or the source directory and its files' SHA-256s),
  counts and SHA-256s per split (dev included, with how it was carved) and the SHA-256 of every file (index
  included).

A later call with the same identity (generator version, scale, seed; or the source files' checksums) reuses the files when their checksums match the
manifest; a store whose files differ from its manifest is refused (:class:`StoreIntegrityError`, naming the
file) until it is rebuilt with ``force=True`` (``intraskill env build --force``). A store written by an older
schema (``intraskill-store-v2``: no dev split) is rebuilt by the builders and refused by :func:`open_store`; the
rebuild leaves the catalogue and the train / val / test lists as they were, so recorded plans still match.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from intraskill.hashing import sha256_file, sha256_text
from intraskill.jsonl import write_json
from intraskill.params import STORE_SEED
from intraskill.paths import resolve_project_path, runs_root, store_dir
from intraskill.shop.data import Catalog, read_raw_products, write_raw_products
from intraskill.shop.engine import ShopEngine, StoreConfig
from intraskill.shop.search import SearchIndex
from intraskill.shop.shopsim_files import SOURCE_KIND, load_source, locate
from intraskill.shop.splits import Splits, build_splits, carve_dev
from intraskill.shop.synth import GENERATOR_VERSION, generate_raw_products, scale_spec

LOGGER = logging.getLogger(__name__)

STORE_SCHEMA_VERSION = "intraskill-store-v3"
DEFAULT_STORE_SEED = STORE_SEED


@dataclass(frozen=True)
class StorePaths:
    """The files of a store directory."""

    root: Path

    @property
    def products(self) -> Path:
        return self.root / "products.json.gz"

    @property
    def splits(self) -> Path:
        return self.root / "splits.json"

    @property
    def index(self) -> Path:
        return self.root / "search.sqlite3"

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"


@dataclass(frozen=True)
class StoreArtifacts:
    """What :func:`build_store` returns: the paths, the catalogue (splits attached) and the splits."""

    paths: StorePaths
    catalog: Catalog
    splits: Splits
    manifest: dict[str, Any]
    reused: bool


def _identity(scale: str, seed: int) -> dict[str, Any]:
    return {"schema_version": STORE_SCHEMA_VERSION, "generator_version": GENERATOR_VERSION,
            "scale": scale, "seed": seed}


STORE_FILES = ("products", "splits", "index")


class StoreIntegrityError(ValueError):
    """A store file is missing or differs from the checksum its manifest records."""


def _read_manifest(paths: StorePaths) -> dict[str, Any] | None:
    if not paths.manifest.is_file():
        return None
    try:
        manifest = json.loads(paths.manifest.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise StoreIntegrityError(f"{paths.manifest}: truncated or corrupt ({error}); rebuild the store with "
                                  f"`intraskill env build --root {paths.root} --force`") from None
    if not isinstance(manifest, dict):
        raise StoreIntegrityError(f"{paths.manifest}: expected a JSON object, got {type(manifest).__name__}")
    return manifest


def verify_store(paths: StorePaths, manifest: dict[str, Any]) -> None:
    """Check every file of :data:`STORE_FILES` against the manifest's SHA-256; raise naming the first bad one."""
    files = manifest.get("files", {})
    for name in STORE_FILES:
        path: Path = getattr(paths, name)
        problem = ("is missing" if not path.is_file() else "has no checksum in the manifest" if name not in files
                   else "differs from the checksum in the manifest" if sha256_file(path) != files[name] else None)
        if problem is not None:
            raise StoreIntegrityError(
                f"{path} {problem} ({paths.manifest}); rebuild the store with "
                f"`intraskill env build --root {paths.root} --force`"
            )


def _reusable(paths: StorePaths, identity: dict[str, Any], force: bool) -> StoreArtifacts | None:
    """The store under ``paths`` when its manifest records ``identity`` (and ``force`` is off), else ``None``."""
    manifest = None if force else _read_manifest(paths)
    if manifest is None or any(manifest.get(k) != v for k, v in identity.items()):
        return None
    catalog, index, splits = open_store(paths.root)
    index.close()
    return StoreArtifacts(paths, catalog, splits, manifest, reused=True)


def _building(paths: StorePaths) -> FileLock:
    """The store's build lock (``<root>.lock`` beside it): one process builds or checks a store at a time, so two
    that need the same store build it once and the other reuses it."""
    paths.root.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(paths.root.with_name(paths.root.name + ".lock"))


def _write_store(paths: StorePaths, identity: dict[str, Any], records: list[dict[str, Any]], catalog: Catalog,
                 splits: Splits) -> StoreArtifacts:
    """Write the products, splits, search index and manifest of ``catalog`` (splits attached) under ``paths``."""
    paths.root.mkdir(parents=True, exist_ok=True)
    paths.manifest.unlink(missing_ok=True)  # an interrupted rebuild leaves no manifest, so the next call rebuilds
    write_raw_products(records, paths.products)
    splits.save(paths.splits)
    SearchIndex.build(catalog.products, paths.index, catalog.sha256, force=True).close()
    manifest = {
        **identity,
        "catalog_sha256": catalog.sha256,
        "counts": {"products": len(catalog.products), "tasks": len(catalog.goals),
                   **{f"{n}_tasks": len(splits.ids(n)) for n in splits.names}},
        "split_sha256": {n: splits.sha256(n) for n in splits.names},
        "dev_carve": splits.meta["dev_carve"],
        "files": {name: sha256_file(getattr(paths, name)) for name in STORE_FILES},
    }
    write_json(paths.manifest, manifest, indent=1)
    return StoreArtifacts(paths, catalog, splits, manifest, reused=False)


def build_store(root: str | Path, scale: str = "default", seed: int = DEFAULT_STORE_SEED,
                force: bool = False) -> StoreArtifacts:
    """Generate the catalogue, tasks, splits and search index under ``root`` (or reuse them).

    Parameters
    ----------
    root : directory of the store (created if missing).
    scale : ``"default"`` (22,630 products, 3726 / 400 / 400 tasks) or ``"small"`` (1,000 / 120 / 40 / 40).
    seed : generation seed; the split uses the same seed.
    force : rebuild even when a store of this identity is there (also one refused as damaged, or one built
        from ShopSimulator files).

    A store of another identity (generator version, scale, seed) is rebuilt; one of this identity whose files
    differ from its manifest raises :class:`StoreIntegrityError` unless ``force``, and so does a store built from
    ShopSimulator files (it cannot be regenerated).
    """
    spec = scale_spec(scale)
    paths = StorePaths(Path(root))
    identity = _identity(scale, seed)
    with _building(paths):
        reused = _reusable(paths, identity, force)
        if reused is not None:
            return reused
        source = None if force else (_read_manifest(paths) or {}).get("source")
        if source is not None:
            raise StoreIntegrityError(f"{paths.root} holds a store built from ShopSimulator files ({source['dir']}); "
                                      "set store.source to that directory, or pass --force to replace it")
        LOGGER.info("building the store (scale %s, seed %s) in %s", scale, seed, paths.root)
        records = generate_raw_products(scale, seed)
        catalog = Catalog.from_records(records)
        splits = build_splits(catalog.goals.values(), val_size=spec.val_size, test_size=spec.test_size, seed=seed)
        splits = carve_dev(splits, catalog.goals)
        catalog.attach_splits(splits)
        return _write_store(paths, identity, records, catalog, splits)


def build_shopsimulator_store(root: str | Path, source: str | Path, force: bool = False) -> StoreArtifacts:
    """Build (or reuse) a store under ``root`` from the published files of the ShopSimulator directory ``source``.

    The files are found and checked by :func:`intraskill.shop.shopsim_files.load_source` (errors name the file
    and the field); the store holds the cleaned catalogue as given, the persona split as given, and a manifest
    whose ``source`` records the directory and each file's SHA-256. A store built from files with the same
    checksums is reused unless ``force``.
    """
    paths = StorePaths(Path(root))
    files = locate(source)
    identity = {"schema_version": STORE_SCHEMA_VERSION, "source": {"kind": SOURCE_KIND, "dir": str(files.root),
                                                                   "files": files.sha256()}}
    with _building(paths):
        reused = _reusable(paths, identity, force)
        if reused is not None:
            return reused
        LOGGER.info("building the store from the ShopSimulator files in %s into %s", files.root, paths.root)
        loaded = load_source(files.root)
        splits = carve_dev(loaded.splits, loaded.catalog.goals)
        loaded.catalog.attach_splits(splits)
        return _write_store(paths, identity, loaded.records, loaded.catalog, splits)


def open_store(root: str | Path) -> tuple[Catalog, SearchIndex, Splits]:
    """Open a built store: the catalogue (splits attached), its search index and the splits.

    Every file is checked against the manifest's SHA-256 (:class:`StoreIntegrityError`) and the index
    against the catalogue's product SHA-256 (fail closed).
    """
    paths = StorePaths(Path(root))
    manifest = _read_manifest(paths)
    if manifest is None:
        raise FileNotFoundError(f"no store manifest at {paths.manifest} (run `intraskill env build --root {root}`)")
    if manifest.get("schema_version") != STORE_SCHEMA_VERSION:
        raise StoreIntegrityError(f"{paths.manifest}: a store of schema {manifest.get('schema_version')!r}, not "
                                  f"{STORE_SCHEMA_VERSION!r} (it has no dev split); rebuild the store with "
                                  f"`intraskill env build --root {paths.root} --force`")
    verify_store(paths, manifest)
    splits = Splits.load(paths.splits)
    catalog = Catalog.from_records(read_raw_products(paths.products), splits=splits)
    index = SearchIndex.open(paths.index, catalog.sha256)
    return catalog, index, splits


@dataclass(frozen=True)
class StoreHandle:
    """An in-process engine over a built store, one split's task IDs and the identity plans record."""

    engine: Any
    catalog: Catalog
    split: str
    task_ids: tuple[int, ...]
    identity: dict[str, Any]

    def close(self) -> None:
        """Nothing to release: the index stays open with the process's opened store (:func:`open_engine`)."""


def default_store_root(store: Any, run_root: str | Path = "runs") -> Path:
    """The cached store of a ``store`` section: ``<run_root>/store/<scale>-<seed>``, or for a ``source``
    directory ``<run_root>/store/shopsimulator-<first 12 hex of the SHA-256 of its absolute path>``."""
    if store.source is None:
        return store_dir(store.scale, store.seed, run_root)
    key = sha256_text(str(resolve_project_path(store.source).resolve()))[:12]
    return runs_root(run_root) / "store" / f"{SOURCE_KIND}-{key}"


def ensure_store(store: Any, root: str | Path | None = None, run_root: str | Path = "runs") -> StoreArtifacts:
    """Build (or reuse) the store of a ``store`` section under ``root`` (default :func:`default_store_root`):
    from ``store.source`` (a ShopSimulator directory, relative to the project root) when set, else the
    synthetic catalogue of ``store.scale`` and ``store.seed``."""
    root = Path(root) if root is not None else default_store_root(store, run_root)
    if store.source is None:
        return build_store(root, store.scale, store.seed)
    return build_shopsimulator_store(root, resolve_project_path(store.source))


def store_config(store: Any, search_engine: str = "fast") -> StoreConfig:
    """The engine settings of a parameter set's ``store`` section (``Params.store``), in persona mode."""
    return StoreConfig(page_size=store.page_size, top_k=store.top_k, max_actions=store.max_actions,
                       language=store.language, persona=True, search_engine=search_engine)


_OPENED: dict[tuple[Any, ...], tuple[StoreArtifacts, ShopEngine]] = {}
"""The store this process opened last, by its directory, settings and files' sizes and modification times: its
catalogue, index and page cache (seconds of loading and checking, hundreds of MB) serve every later
:func:`open_engine` of it until another store is opened or a file changes."""


def _file_stamps(paths: StorePaths) -> tuple[tuple[str, int, int], ...]:
    stamps = []
    for path in (paths.products, paths.splits, paths.index, paths.manifest):
        if path.exists():
            stat = path.stat()
            stamps.append((path.name, stat.st_size, stat.st_mtime_ns))
    return tuple(stamps)


def open_engine(store: Any, split: str, root: str | Path | None = None, run_root: str | Path = "runs",
                search_engine: str = "fast") -> StoreHandle:
    """Build (or reuse) the store of a parameter set's ``store`` section and open an engine over it.

    ``store`` carries ``scale, seed, source, page_size, top_k, max_actions, language`` (``Params.store``);
    ``root`` defaults to :func:`default_store_root`; ``search_engine`` is ``"fast"`` or ``"fts5"`` (the same
    ranking, see :mod:`intraskill.shop.search`). The identity names the catalogue by scale and seed, or by the
    source files' SHA-256s.
    """
    root = Path(root) if root is not None else default_store_root(store, run_root)
    config = store_config(store, search_engine)
    settings = (str(root.resolve()), store.scale, store.seed, store.source, config)
    opened = _OPENED.get((settings, _file_stamps(StorePaths(root))))
    if opened is None:
        artifacts = ensure_store(store, root, run_root)
        engine = ShopEngine(artifacts.catalog.products, artifacts.catalog.goals,
                            SearchIndex.open(artifacts.paths.index, artifacts.catalog.sha256), config)
        _OPENED.clear()  # a handle still using the previous store keeps it (its index closes with its last user)
        _OPENED[(settings, _file_stamps(artifacts.paths))] = opened = (artifacts, engine)
    artifacts, engine = opened[0], opened[1].fresh()
    catalog, index = artifacts.catalog, engine.index
    source = artifacts.manifest.get("source")
    catalogue = ({"scale": store.scale, "store_seed": store.seed} if source is None
                 else {"source": {"kind": source["kind"], "files": source["files"]}})
    identity = {
        "adapter": "in_process",
        **catalogue,
        "catalog_sha256": catalog.sha256,
        "split": split,
        "split_sha256": artifacts.splits.sha256(split),
        "index_manifest": dict(index.manifest),
        "versions": engine.versions(),
        "store_config": asdict(config),
    }
    return StoreHandle(engine, catalog, split, tuple(catalog.task_ids(split)), identity)
