"""Checks on write input: every failure names the field, before any query runs."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape._limits import MAX_PROPERTY_BYTES, MAX_STEPS
from symfonic_graph.shape.names import bare_identifier, tool_name_problem

_SCALARS: Final = (str, int, float, bool)


def text(field: str, value: object, *, required: bool = True) -> str:
    """A string; non-empty (after strip) when ``required``."""
    if not isinstance(value, str):
        raise ValidationError(field, f"must be a string, got {type(value).__name__}")
    if required and not value.strip():
        raise ValidationError(field, "must not be empty")
    return encodable(field, value)


def encodable(field: str, value: str) -> str:
    """``value`` if it is valid Unicode text (no lone surrogates), else a ValidationError."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(field, f"is not valid Unicode text ({exc.reason} at index {exc.start})") from None
    return value


def optional_text(field: str, value: object) -> str | None:
    """None, or a non-empty string."""
    return None if value is None else text(field, value)


def string_list(field: str, value: object) -> list[str]:
    """A non-empty list of non-empty strings."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ValidationError(field, f"must be a list of strings, got {type(value).__name__}")
    if not value:
        raise ValidationError(field, "must hold at least one entry")
    if len(value) > MAX_STEPS:
        raise ValidationError(field, f"has {len(value)} entries; at most {MAX_STEPS}")
    return [within_property_bytes(f"{field}[{i}]", text(f"{field}[{i}]", item)) for i, item in enumerate(value)]


def within_property_bytes(field: str, value: str) -> str:
    """``value`` if its UTF-8 form fits ``MAX_PROPERTY_BYTES`` (a catalog ships every turn), else a ValidationError."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_PROPERTY_BYTES:
        raise ValidationError(field, f"is {size} bytes; at most {MAX_PROPERTY_BYTES} (every turn ships it): shorten it")
    return value


def text_within_property_bytes(field: str, value: object) -> str:
    return within_property_bytes(field, text(field, value))


def tool_name(field: str, value: object) -> str:
    name = bare_identifier(value)
    if name is None and (isinstance(value, str) or value is None):
        raise ValidationError(field, f"must be a tool name such as `lookup_order` or `issue-refund`: "
                                     f"{tool_name_problem(value)}")
    return text_within_property_bytes(field, value).strip()


def action_tool_input(field: str, value: object) -> str | None:
    """A written ``action_tool``: None, or a tool reference (else a ``ValidationError`` naming ``field``).

    Example:
        >>> action_tool_input("action_tool", "issue-refund")
        'issue-refund'
        >>> action_tool_input("action_tool", "issue refund")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        symfonic_graph.errors.ValidationError: action_tool: must be a tool name ... is not a tool name ...
    """
    if value is None:
        return None
    tool_name(field, value)
    return str(value)


def state_value(field: str, value: object) -> Any:
    """A value Neo4j stores natively: a finite scalar or a list of scalars of one type."""
    if isinstance(value, str):
        return text_within_property_bytes(field, value) if value else value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValidationError(field, f"must be a finite number, got {value!r}")
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        kinds = {bool if isinstance(v, bool) else type(v) for v in value}
        if not all(isinstance(v, _SCALARS) for v in value) or len(kinds) > 1:
            raise ValidationError(field, "a list value must hold scalars of one type (str, int, float or bool)")
        return [state_value(f"{field}[{i}]", v) for i, v in enumerate(value)]
    raise ValidationError(
        field, f"must be a str, int, float, bool or a list of one of them, got {type(value).__name__}")


def field_path(loc: Sequence[int | str], prefix: str = "") -> str:
    """A pydantic error location as our field path: ``("steps", 0)`` -> ``steps[0]``.

    Example:
        >>> field_path(("state", "op"), "precondition[0].")
        'precondition[0].state.op'
    """
    path = prefix.rstrip(".")
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path
