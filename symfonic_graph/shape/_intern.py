"""One shared copy of equal immutable values held by compiled catalogs.

Many tenants are seeded from the same templates, and one tenant's skills name
the same few tools again and again: a process that caches thousands of
scopes would otherwise hold thousands of equal strings, tuples and frozen
precondition records. ``shared`` returns the copy seen first. Strings go to
Python's own intern table (entries die with their last reference); other
values are kept in a bounded table keyed by their contents with the type of
every part, so values that compare equal but mean different things (``1``,
``1.0`` and ``True``) are never merged.

Example:
    >>> a, b = shared(("auth", "lookup")), shared(tuple(["auth", "lookup"]))
    >>> a is b
    True
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any, TypeVar

from pydantic import BaseModel

T = TypeVar("T")

_MAX_KEPT = 65_536
"""Values kept at most; the table starts afresh past it (values handed out stay valid)."""
_kept: dict[Hashable, Any] = {}
_canonical: dict[int, Any] = {}  # id -> a value of _kept: handed out before, returned as is
_PLAIN = frozenset({bool, int, float, type(None)})


class _Unshared(Exception):
    """A part that is not shared (a list, a date, a nested record)."""


def _leaf(value: object) -> Hashable:
    """A key part for a field value: itself when unambiguous, else tagged with its type (``1`` vs ``True``)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is tuple and all(type(v) is str for v in value):  # type: ignore[attr-defined]
        return value
    if kind is bool or kind is int or kind is float:
        return (kind, value)
    if kind is list or kind is tuple:  # a state predicate's list of values
        return (kind, *map(_leaf, value))  # type: ignore[call-overload]
    raise _Unshared


def shared(value: T) -> T:
    """``value``, or the value handed out before that is equal to it with the same types throughout.

    Shared: strings, tuples (their items shared first), ``dict``s of strings
    to plain values, and frozen pydantic records of plain values (lists of
    them included); anything else comes back as is. A shared ``dict``, or a
    list inside a shared record, must never be mutated.
    """
    kind = type(value)
    if isinstance(value, str) and kind is str:
        return sys.intern(value)  # type: ignore[return-value]
    if kind in _PLAIN or _canonical.get(id(value)) is value:
        return value
    try:
        if kind is tuple:
            value = tuple([shared(v) for v in value])  # type: ignore[assignment, attr-defined]
            key: Hashable = (tuple, *map(id, value))  # type: ignore[call-overload]  # the kept tuple keeps them alive
        elif kind is dict:
            key = (dict, *((k, _leaf(v)) for k, v in value.items()))  # type: ignore[attr-defined]
        elif isinstance(value, BaseModel) and value.model_config.get("frozen"):
            fields = value.__dict__.values()
            plain = all(type(v) is str or v is None for v in fields)  # the common record: strings only
            key = (kind, *fields) if plain else (kind, *map(_leaf, fields))
        else:
            return value
    except _Unshared:
        return value
    kept = _kept.get(key)
    if kept is not None:
        return kept  # type: ignore[no-any-return]
    if len(_kept) >= _MAX_KEPT:
        _kept.clear()
        _canonical.clear()
    _kept[key] = value
    _canonical[id(value)] = value
    return value
