"""Checks on write input: every failure names the field, before any query runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from symfonic_graph.errors import ValidationError
from symfonic_graph.models import STATE_OPS
from symfonic_graph.preconditions import bare_identifier

_SCALARS = (str, int, float, bool)


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
    return [text(f"{field}[{i}]", item) for i, item in enumerate(value)]


def property_value(field: str, value: object) -> Any:
    """A value Neo4j stores natively: a scalar or a homogeneous list of scalars."""
    if isinstance(value, str):
        return encodable(field, value)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, (list, tuple)):
        kinds = {bool if isinstance(v, bool) else type(v) for v in value}
        if not all(isinstance(v, _SCALARS) for v in value) or len(kinds) > 1:
            raise ValidationError(field, "a list value must hold scalars of one type (str, int, float or bool)")
        return [encodable(f"{field}[{i}]", v) if isinstance(v, str) else v for i, v in enumerate(value)]
    raise ValidationError(
        field, f"must be a str, int, float, bool or a list of one of them, got {type(value).__name__}"
    )


MAX_PRECONDITIONS = 64


def precondition_rows(value: object) -> list[dict[str, Any]]:
    """Turn a skill's ``precondition`` argument into Precondition node rows."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)) and len(value) > MAX_PRECONDITIONS:
        raise ValidationError(
            "precondition", f"has {len(value)} entries; a skill takes at most {MAX_PRECONDITIONS}"
        )
    items: list[Any] = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple)) else None  # type: ignore[assignment]
    if items is None:
        raise ValidationError("precondition", f"must be None, a string or a list, got {type(value).__name__}")
    return [_precondition_row(f"precondition[{i}]", item, i) for i, item in enumerate(items)]


def _precondition_row(field: str, item: object, position: int) -> dict[str, Any]:
    row: dict[str, Any] = {"position": position, "tool": None, "path": None, "op": None, "value": None, "text": None}
    if isinstance(item, str):
        text(field, item)
        if bare_identifier(item) is not None:
            return {**row, "kind": "tool", "tool": item.strip()}
        return {**row, "kind": "text", "text": item}
    if isinstance(item, Mapping) and set(item) == {"tool"}:
        return {**row, "kind": "tool", "tool": text(f"{field}.tool", item["tool"]).strip()}
    if isinstance(item, Mapping) and set(item) == {"state"} and isinstance(item["state"], Mapping):
        state = item["state"]
        extra = set(state) - {"path", "op", "value"}
        if extra:
            raise ValidationError(f"{field}.state", f"unknown keys {sorted(extra)}")
        path = text(f"{field}.state.path", state.get("path"))
        if any(not seg for seg in path.split(".")):
            raise ValidationError(f"{field}.state.path", "must be dot-separated non-empty segments")
        op = state.get("op")
        if op not in STATE_OPS:
            raise ValidationError(f"{field}.state.op", f"must be one of {sorted(STATE_OPS)}, got {op!r}")
        if op == "exists":
            if "value" in state:
                raise ValidationError(f"{field}.state.value", "`exists` takes no value")
            return {**row, "kind": "state", "path": path, "op": op}
        if "value" not in state:
            raise ValidationError(f"{field}.state.value", f"`{op}` needs a value")
        value = property_value(f"{field}.state.value", state["value"])
        if op == "in" and not isinstance(value, list):
            raise ValidationError(f"{field}.state.value", "`in` needs a list value")
        return {**row, "kind": "state", "path": path, "op": op, "value": value}
    raise ValidationError(field, 'must be a string, {"tool": name} or {"state": {path, op, value}}')
