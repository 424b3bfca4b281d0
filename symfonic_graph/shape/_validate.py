"""Checks on write input: every failure names the field, before any query runs."""

from __future__ import annotations

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape._limits import MAX_PROPERTY_BYTES, MAX_STEPS


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
    return [bounded(f"{field}[{i}]", text(f"{field}[{i}]", item)) for i, item in enumerate(value)]


def bounded(field: str, value: str) -> str:
    """``value`` if its UTF-8 form fits ``MAX_PROPERTY_BYTES`` (a catalog ships every turn), else a ValidationError."""
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_PROPERTY_BYTES:
        raise ValidationError(field, f"is {size} bytes; at most {MAX_PROPERTY_BYTES} (every turn ships it): shorten it")
    return value
