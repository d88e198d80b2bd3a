"""The base of every typed record that crosses a stage or a file: a frozen pydantic model with one way out
(:meth:`Record.to_dict`, :meth:`Record.write`) and one way in (:meth:`Record.from_dict`, :meth:`Record.read`).

Unknown keys are refused; a bad record is one :class:`ValueError` line naming the file and the field. A field
listed in ``omit_when_none`` is left out of the JSON while it is ``None`` (a key the file format only has
sometimes), so the files keep the shape they always had.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, ValidationError, model_serializer

from intraskill.jsonl import write_json


class Record(BaseModel):
    """A frozen record written and read back by one ``model_dump`` / ``model_validate`` pair."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    omit_when_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _without_absent_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if not self.omit_when_none:
            return data
        return {key: value for key, value in data.items() if value is not None or key not in self.omit_when_none}

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of the record (float NaN kept as the files have it)."""
        return self.model_dump()

    @classmethod
    def from_dict(cls, data: Any, source: str = "record") -> Any:
        """The record of a JSON object; :class:`ValueError` names ``source`` and the first bad field."""
        try:
            return cls.model_validate(data)
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "(root)"
            raise ValueError(f"{source}: {where}: {first['msg']}") from None

    def write(self, path: str | Path, indent: int = 2) -> Path:
        """Write the record as JSON, atomically (:func:`~intraskill.jsonl.write_json`)."""
        return write_json(path, self.to_dict(), indent=indent)

    @classmethod
    def read(cls, path: str | Path) -> Any:
        """The record stored at ``path``; :class:`ValueError` names the file and the first bad field."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}: not JSON ({error})") from None
        return cls.from_dict(data, str(path))
