"""Inline TeX → MathML for the static renderer, so ``$S_0$`` renders offline without a script.

Covers what the report's prose writes: letters (italic identifiers), numbers, operators, ``_`` and ``^``
with one token or a ``{…}`` group, ``\\text{…}``, Greek letters and a few relations. Anything else raises
``ValueError`` naming the formula, so an unsupported page fails the build instead of showing raw TeX.
Browsers render MathML Core natively; Quarto pages use ``html-math-method: mathml`` for the same result.
"""

from __future__ import annotations

import html
import re

SYMBOLS = {
    **{name: chr(0x3B1 + index) for index, name in enumerate(
        "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
        "varsigma sigma tau upsilon phi chi psi omega".split())},
    "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Upsilon": "Υ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
}
OPERATORS = {"le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "ne": "≠", "neq": "≠", "pm": "±", "times": "×",
             "cdot": "⋅", "to": "→", "in": "∈", "approx": "≈", "sum": "∑", "ldots": "…", "infty": "∞"}
TOKEN = re.compile(r"\\[A-Za-z]+|\\.|[A-Za-z]|\d+(?:\.\d+)?|\S")


class _Parser:
    def __init__(self, tex: str) -> None:
        self.tex = tex
        self.tokens = TOKEN.findall(tex)
        self.index = 0

    def fail(self, why: str) -> ValueError:
        return ValueError(f"math ${self.tex}$: {why} (the static renderer supports a small TeX subset)")

    def peek(self) -> str | None:
        return self.tokens[self.index] if self.index < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise self.fail("unexpected end")
        self.index += 1
        return token

    def row(self, closing: str | None = None) -> str:
        parts = []
        while self.peek() is not None and self.peek() != closing:
            parts.append(self.scripted())
        if closing is not None:
            if self.peek() != closing:
                raise self.fail(f"missing {closing!r}")
            self.take()
        return parts[0] if len(parts) == 1 else f"<mrow>{''.join(parts)}</mrow>"

    def scripted(self) -> str:
        base = self.atom()
        sub = sup = None
        while self.peek() in ("_", "^"):
            kind = self.take()
            script = self.atom()
            if kind == "_":
                sub = script
            else:
                sup = script
        if sub and sup:
            return f"<msubsup>{base}{sub}{sup}</msubsup>"
        if sub:
            return f"<msub>{base}{sub}</msub>"
        return f"<msup>{base}{sup}</msup>" if sup else base

    def atom(self) -> str:
        token = self.take()
        if token == "{":
            return self.row("}")
        if token == "\\text":
            if self.take() != "{":
                raise self.fail("\\text needs {…}")
            words = []
            while self.peek() not in (None, "}"):
                words.append(self.take())
            self.take()
            return f"<mtext>{html.escape(' '.join(words))}</mtext>"
        if token.startswith("\\") and token[1:] in SYMBOLS:
            return f"<mi>{SYMBOLS[token[1:]]}</mi>"
        if token.startswith("\\") and token[1:] in OPERATORS:
            return f"<mo>{OPERATORS[token[1:]]}</mo>"
        if token.startswith("\\") and len(token) == 2 and not token[1].isalnum():
            return f"<mo>{html.escape(token[1])}</mo>"
        if token.startswith("\\"):
            raise self.fail(f"unsupported command {token}")
        if token[0].isalpha():
            return f"<mi>{html.escape(token)}</mi>"
        if token[0].isdigit():
            return f"<mn>{token}</mn>"
        if token in "}_^":
            raise self.fail(f"unexpected {token!r}")
        return f"<mo>{html.escape(token)}</mo>"


def tex_to_mathml(tex: str, display: bool = False) -> str:
    """``<math>`` markup of a TeX formula in the supported subset."""
    body = _Parser(tex.strip()).row()
    mode = ' display="block"' if display else ""
    return f'<math xmlns="http://www.w3.org/1998/Math/MathML"{mode}>{body}</math>'
