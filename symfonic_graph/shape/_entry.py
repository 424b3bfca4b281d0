"""The base of every precondition kind, and the record of a node that could not be read.

A kind is one :class:`_Entry` subclass (see ``records.py`` for the registry and
the built-in kinds, ``rule_kinds.py`` for the kinds over results, arguments and
counts).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Final, Literal

from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from symfonic_graph.errors import ValidationError

__all__ = ["ARG_NAME", "WITHIN", "UnreadablePrecondition"]

WITHIN: Final = ("conversation", "user_turn")
ARG_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Entry(BaseModel):
    """One precondition kind: its record, and everything a kind does with its shape, in one class.

    A kind is one subclass registered with :func:`register_kind`. Every path
    dispatches on the registry, never on a list of kinds:

    * ``from_input(item, field)``: the strict reading of write input (errors name ``field``);
    * ``node()``: the ``:Precondition`` node properties a write stores (a subset of ``NODE_COLUMNS``);
    * ``from_node(props)``: the lenient reading of a graph node (never raises; unreadable fails closed);
    * ``from_item(value)``: the lenient reading of a duck-typed ``metadata`` item (``{item_key: value}``);
    * ``item(typed)``: the ``metadata["precondition"]`` item (what ``from_item`` reads back);
    * ``blocking()``: why the record cannot be enforced as written (its skill then blocks), else None;
    * ``role``: ``"requirement"`` (met by earlier calls), ``"condition"`` (decides whether the
      skill applies, evaluated by the evaluator registered in ``rules.preconditions``), ``"advice"``.
    """

    model_config = ConfigDict(frozen=True)

    role: ClassVar[str] = "condition"
    item_key: ClassVar[str] = ""
    """The key naming the kind in input and metadata shorthand (``{"tool": ...}``); the kind name by default."""
    writable: ClassVar[bool] = True

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> _Entry:
        """The strict reading (default: ``{item_key: {fields}}`` by the model, its first error naming the field)."""
        value = item.get(cls.item_key)
        try:
            return cls.model_validate(value if isinstance(value, Mapping) else {})
        except PydanticValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            raise ValidationError(".".join([f"{field}.{cls.item_key}", *map(str, first["loc"])]),
                                  first["msg"]) from None

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> _Entry:
        """The lenient reading of a node (default: the model's validation, else unreadable)."""
        try:
            return cls.model_validate({k: props.get(k) for k in cls.model_fields if k != "kind"
                                       and props.get(k) is not None})
        except PydanticValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            return UnreadablePrecondition(reason=f"{'.'.join(map(str, first['loc']))}: {first['msg']}")

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> _Entry | None:
        """The lenient reading of a metadata item holding ``item_key`` (default: ``{item_key: {fields}}``)."""
        value = item[cls.item_key]
        try:
            return cls.model_validate(value)
        except PydanticValidationError as exc:
            first = exc.errors(include_url=False, include_input=False)[0]
            where = ".".join([cls.item_key, *map(str, first["loc"])])
            return UnreadablePrecondition(reason=f"{where}: {first['msg']}")

    def node(self) -> dict[str, Any]:
        """The node properties of this record (default: its fields)."""
        return self.model_dump(exclude={"kind"})

    def item(self, typed: bool = False) -> Any:
        """The ``metadata["precondition"]`` item of this record (default: ``{item_key: fields}``)."""
        return {type(self).item_key: self.model_dump(exclude={"kind"})}

    def blocking(self) -> str | None:
        """Why this record cannot be enforced as written (its skill keeps blocking), or None."""
        return None

    def state_paths(self) -> tuple[str, ...] | None:
        """The state paths a condition reads (None: unknown, so a pre-flight block is not cached)."""
        return None

    def canonical(self) -> _Entry:
        """This record without what its evaluation ignores (equal records compile to equal rules)."""
        return self


class UnreadablePrecondition(_Entry):
    """A graph node that could not be read: never satisfied, so its skill keeps blocking."""

    role: ClassVar[str] = "requirement"
    item_key: ClassVar[str] = "unreadable"
    writable: ClassVar[bool] = False
    kind: Literal["unreadable"] = "unreadable"
    reason: str

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> _Entry:
        raise ValidationError(field, f"cannot write an unreadable precondition ({item.get('reason')})")

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> _Entry | None:
        return cls(reason=str(item["unreadable"]))

    def node(self) -> dict[str, Any]:
        return {}

    def item(self, typed: bool = False) -> Any:
        return {"unreadable": self.reason}

    def blocking(self) -> str | None:
        return self.reason



def _names(value: object) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        return None
    return tuple(value) if all(isinstance(v, str) for v in value) else None


def _keys(field: str, item: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(str(k) for k in set(item) - allowed)
    if extra:
        raise ValidationError(field, f"unknown keys {extra} (allowed: {sorted(allowed)})")
