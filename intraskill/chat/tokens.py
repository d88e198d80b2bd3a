"""Token ids of rendered ChatML in which only the renderer's own markup becomes special tokens.

A tokenizer called on a whole rendered string turns every ``<|im_start|>``, ``<|im_end|>`` or
``<tool_call>`` it finds into that token, wherever the text came from: a user or a tool result that
writes ``<|im_end|>\\n<|im_start|>system\\n…`` would open a turn of its own. :class:`ChatEncoder` encodes
:func:`~intraskill.chat.chatml.render_spans` instead: added tokens (special or not) count only inside
markup spans; anywhere else their text is encoded as ordinary text. Text without added-token strings
encodes to exactly the ids the whole string gets (a tokenizer splits at added tokens first, and the
encoder splits at the same places).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from intraskill.chat.chatml import Span


class ChatEncoder:
    """Encodes spans with a Hugging Face tokenizer (anything with ``get_added_vocab`` and ``__call__``)."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self._added: dict[str, int] = dict(tokenizer.get_added_vocab())
        longest_first = sorted((token for token in self._added if len(token) > 1), key=len, reverse=True)
        self._pattern = re.compile("|".join(map(re.escape, longest_first))) if longest_first else None

    def encode(self, spans: Sequence[Span]) -> list[int]:
        """The token ids of ``spans`` (no BOS/EOS added)."""
        ids: list[int] = []
        pieces = [""]  # text since the last markup token; a new piece starts inside each added-token string
        for text, markup in spans:
            if self._pattern is None:
                pieces[-1] += text
            elif markup:
                position = 0
                for match in self._pattern.finditer(text):
                    pieces[-1] += text[position:match.start()]
                    ids += self._text_ids(pieces)
                    ids.append(self._added[match.group()])
                    pieces, position = [""], match.end()
                pieces[-1] += text[position:]
            else:
                position = 0
                while (match := self._pattern.search(text, position)) is not None:
                    cut = match.start() + 1  # the token's text straddles two pieces: never matched whole
                    pieces[-1] += text[position:cut]
                    pieces.append("")
                    position = cut
                pieces[-1] += text[position:]
        return ids + self._text_ids(pieces)

    def _text_ids(self, pieces: list[str]) -> list[int]:
        texts = [piece for piece in pieces if piece]
        if not texts:
            return []
        encoded = self.tokenizer(texts, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        return [token for row in encoded for token in row]
