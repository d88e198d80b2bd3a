"""Figure plumbing shared by every plot: language and CJK-font resolution, styled figure creation
(``matplotlib.figure.Figure`` with an Agg canvas, never pyplot), deterministic SVG+PNG export, tidy-input
checks and round-boundary markers.

Style settings are applied through ``matplotlib.rc_context`` while a figure is built or saved, so no
global matplotlib state changes.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import io
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from intraskill.plots.labels import label, label_or

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

logger = logging.getLogger(__name__)

CJK_FONT_NAMES = (
    "Noto Sans CJK SC",
    "Noto Sans SC",
    "Source Han Sans SC",
    "Source Han Sans CN",
    "WenQuanYi Zen Hei",
    "WenQuanYi Micro Hei",
    "SimHei",
    "Noto Sans CJK JP",
    "Noto Sans CJK TC",
    "Noto Serif CJK SC",
    "Source Han Serif SC",
)
"""Font families able to render Simplified Chinese, in order of preference."""
PACKAGED_CJK_FONT = ("mplfonts", "fonts/NotoSansCJKsc-Regular.otf")
"""Noto Sans CJK SC (SIL Open Font License 1.1) as the ``mplfonts`` wheel ships it: (package, file inside it).
A declared dependency, so Chinese figures need no system font."""
SVG_HASH_SALT = "intraskill"
"""Fixed ``svg.hashsalt`` so SVG element ids are identical across runs."""
SVG_RC = {"svg.hashsalt": SVG_HASH_SALT, "svg.fonttype": "path"}
"""SVG settings of every written figure: fixed ids, text as paths (renders without the fonts installed)."""
SVG_METADATA = {"Date": None, "Creator": "intraskill"}
PNG_DPI = 150
COLORS = {
    "base_free": "#8da0cb",
    "base_s0": "#4c72b0",
    "iter80_free": "#fc8d62",
    "iter80_st": "#d95f02",
    "selected": "#55a868",
    "retired": "#8c8c8c",
    "non_positive": "#c44e52",
    "rewrite_loser": "#dd8452",
    "budget_excluded": "#b07aa1",
    "line": "#4c72b0",
    "smooth": "#1b3a6b",
    "boundary": "#7f7f7f",
    "zero_grad": "#c44e52",
}
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def packaged_cjk_font_file() -> Path | None:
    """Path of :data:`PACKAGED_CJK_FONT`, found without importing the package; ``None`` when it is not installed."""
    package, relative = PACKAGED_CJK_FONT
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    return path if path.is_file() else None


@functools.lru_cache(maxsize=1)
def find_cjk_font() -> str | None:
    """Family name of a font that renders Simplified Chinese, or ``None``.

    The one place figures pick their CJK font: registers the packaged Noto Sans CJK SC
    (:data:`PACKAGED_CJK_FONT`) with matplotlib's font manager, then returns the first of
    :data:`CJK_FONT_NAMES` matplotlib knows (the packaged font first, so figures look the same on every machine).
    """
    # deferred: matplotlib is heavy to import
    from matplotlib import font_manager

    packaged = packaged_cjk_font_file()
    if packaged is not None:
        font_manager.fontManager.addfont(str(packaged))
    names = {entry.name for entry in font_manager.fontManager.ttflist}
    return next((name for name in CJK_FONT_NAMES if name in names), None)


@dataclass(frozen=True)
class Labeller:
    """The language a figure is drawn in, with the font that renders it.

    Build with :meth:`for_language`; ``language`` is the *effective* language: ``"zh"`` degrades to
    ``"en"`` (with a logged warning) when no CJK font is installed, so no glyph ever renders as tofu.
    """

    language: str
    font: str | None = None

    @classmethod
    def for_language(cls, language: str) -> "Labeller":
        """Resolve ``language`` (``"en"`` or ``"zh"``) against the installed fonts."""
        if language not in ("en", "zh"):
            raise ValueError(f"language must be 'en' or 'zh', got {language!r}")
        if language == "en":
            return cls("en")
        font = find_cjk_font()
        if font is None:
            logger.warning(
                "no CJK font found (looked for %s); drawing this figure with English labels. "
                "Install the mplfonts package (a dependency of intraskill) for Chinese figure labels.",
                ", ".join(CJK_FONT_NAMES[:5]),
            )
            return cls("en")
        return cls("zh", font)

    def __call__(self, key: str, **fields: object) -> str:
        return label(key, self.language, **fields)

    def metric(self, prefix: str, name: str) -> str:
        """Label of an open-ended metric: ``LABELS[prefix + name]`` if present, else ``name`` itself."""
        return label_or(f"{prefix}{name}", self.language, name)

    def families(self) -> list[str] | None:
        """Font families in order: the CJK font first for Chinese; for English DejaVu Sans, then an installed
        CJK font as fallback (data such as the release's chunk titles can be Chinese); ``None``: defaults."""
        if self.font:
            return [self.font, "DejaVu Sans"]
        fallback = find_cjk_font()
        return ["DejaVu Sans", fallback] if fallback else None

    def rc(self) -> dict[str, Any]:
        """rcParams for building a figure in this language."""
        params: dict[str, Any] = {
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.titlesize": 11,
            "axes.labelsize": 9.5,
            "xtick.labelsize": 8.5,
            "ytick.labelsize": 8.5,
            "legend.fontsize": 8.5,
            "legend.frameon": False,
            "svg.hashsalt": SVG_HASH_SALT,
        }
        families = self.families()
        if families:
            params["font.family"] = families
        if self.font:
            params["axes.unicode_minus"] = False
        return params

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Context in which a figure of this language is built (text picks up the font at creation)."""
        # deferred: matplotlib is heavy to import
        import matplotlib

        with matplotlib.rc_context(self.rc()):
            yield

    def finish(self, figure: "Figure") -> "Figure":
        """Pin the font on tick labels created later (at draw time) and return ``figure``."""
        families = self.families()
        if families:
            for axes in figure.axes:
                axes.tick_params(labelfontfamily=families)
        return figure


def _repr_png(figure: "Figure") -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return buffer.getvalue()


def _repr_svg(figure: "Figure") -> str:
    # deferred: matplotlib is heavy to import
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context(SVG_RC):
        figure.savefig(buffer, format="svg", metadata=SVG_METADATA)
    return buffer.getvalue()


@functools.lru_cache(maxsize=1)
def _figure_class() -> type:
    """``Figure`` subclass with ``_repr_png_`` and ``_repr_svg_`` (both reproducible, as :func:`save_figure`
    writes them), so a returned figure shows in Jupyter without pyplot or an inline backend and its executed
    outputs are the publication files (:mod:`intraskill.report.figures`)."""
    # deferred: matplotlib is heavy to import
    from matplotlib.figure import Figure

    return type("IntraSkillFigure", (Figure,), {"_repr_png_": _repr_png, "_repr_svg_": _repr_svg,
                                                "__module__": __name__})


def new_figure(width: float, height: float) -> "Figure":
    """A ``Figure`` of ``width`` × ``height`` inches with its own Agg canvas (no pyplot state)."""
    # deferred: matplotlib is heavy to import
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    figure = _figure_class()(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def save_figure(figure: "Figure", name: str, out_dir: str | Path = "figures") -> tuple[Path, Path]:
    """Write ``figure`` as ``<out_dir>/<name>.svg`` and ``.png``, byte-for-byte reproducibly.

    SVG ids use a fixed hash salt, the SVG carries no date and a fixed creator, the PNG no software
    tag; text is stored as paths so the SVG renders without the fonts installed.

    Returns
    -------
    (svg_path, png_path)
    """
    # deferred: matplotlib is heavy to import
    import matplotlib

    if not NAME_PATTERN.match(name):
        raise ValueError(f"name must be a plain file stem (letters, digits, '.', '_', '-'), got {name!r}")
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    svg_path, png_path = folder / f"{name}.svg", folder / f"{name}.png"
    with matplotlib.rc_context(SVG_RC):
        figure.savefig(svg_path, format="svg", metadata=SVG_METADATA)
        figure.savefig(png_path, format="png", dpi=PNG_DPI, metadata={"Software": None})
    return svg_path, png_path


def frame(data: "pd.DataFrame | Sequence[Mapping[str, Any]]", required: Sequence[str], what: str) -> "pd.DataFrame":
    """A copy of ``data`` (DataFrame or list of records) as a DataFrame, checked for ``required`` columns.

    Raises
    ------
    ValueError
        Naming ``what`` and the missing columns, or when ``data`` is empty.
    """
    # deferred: pandas is heavy to import
    import pandas as pd

    table = data.copy() if isinstance(data, pd.DataFrame) else pd.DataFrame(list(data))
    missing = [column for column in required if column not in table.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {missing}; got {list(table.columns)}")
    if table.empty:
        raise ValueError(f"{what}: no rows to plot")
    return table.reset_index(drop=True)


def round_starts(x: Sequence[float], rounds: Sequence[float] | None, per_round: int) -> list[float]:
    """Boundary positions between rounds: where ``rounds`` changes, else every ``per_round`` units of x.

    A boundary sits halfway between the last x of one round and the first of the next.
    """
    values = list(x)
    if not values:
        return []
    if rounds is not None:
        pairs = list(zip(values, rounds))
        return [
            (prev_x + cur_x) / 2
            for (prev_x, prev_r), (cur_x, cur_r) in zip(pairs, pairs[1:])
            if cur_r != prev_r
        ]
    if per_round <= 0:
        raise ValueError(f"per_round must be positive, got {per_round}")
    first, last = min(values), max(values)
    edge = (int(first // per_round) + 1) * per_round
    boundaries = []
    while edge < last:
        boundaries.append(edge + 0.5)
        edge += per_round
    return boundaries


def mark_boundaries(axes: "Axes", boundaries: Sequence[float]) -> None:
    """Dashed vertical lines at the round boundaries."""
    for position in boundaries:
        axes.axvline(position, color=COLORS["boundary"], linestyle="--", linewidth=0.8, alpha=0.8, zorder=1)
