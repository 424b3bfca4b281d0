"""Readers for untrusted JSON and YAML within limits of size, nesting depth and values (seed files).

Python's own parsers recurse once per nesting level, so a file nested
100,000 levels deep ends in a ``RecursionError``; a YAML alias can make a
small file expand into a huge tree; JSON and YAML both accept ``NaN`` and
``Infinity``, which no memory node can hold. These readers refuse all three
before anything else sees the data, with one ``ValidationError`` naming the
source (the file) and, where it helps, the path inside it:

    >>> load_json_within_limits('{"a": [1, 2]}', source="seed.json")
    {'a': [1, 2]}
    >>> load_json_within_limits('[' * 100_000, source="seed.json")
    Traceback (most recent call last):
    symfonic_graph.errors.ValidationError: seed.json: nested deeper than 64 levels; ...

Every check is a loop over an explicit stack, never a recursion.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from symfonic_graph.errors import ValidationError

# A seed file is at most this many bytes: a 100k-skill file is about 30 MB
# spread over several files in practice; one file beyond this is a mistake.
MAX_FILE_BYTES = 16 * 1024 * 1024
# Nesting levels (mappings and lists) a file may use. A seed file needs 5.
MAX_DEPTH = 64
# Values (scalars, lists and mappings) a loaded tree may hold, aliases expanded.
MAX_VALUES = 4_000_000

# The JSON tokens that matter for nesting: brackets and whole strings (so that
# brackets inside strings are skipped).
_JSON_TOKENS = re.compile(r'[\[\]{}]|"(?:[^"\\]|\\.)*"', re.DOTALL)


def _too_deep(source: str) -> ValidationError:
    return ValidationError(source, f"nested deeper than {MAX_DEPTH} levels; a seed file needs a handful, "
                                   "so this is not one (flatten it or check how it was generated)")


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number a memory node can hold; use a finite number or a string")


def finite_or_error(field: str, value: Any) -> Any:
    """``value`` unchanged, or a ``ValidationError`` naming ``field`` if it is or holds a NaN or infinite float.

    Lists and mappings are searched (without recursion); the error names the
    first offending element, e.g. ``value[2]``.

    Example:
        >>> finite_or_error("value", [1.0, 2.5])
        [1.0, 2.5]
        >>> finite_or_error("value", float("nan"))
        Traceback (most recent call last):
        symfonic_graph.errors.ValidationError: value: must be a finite number, got nan; ...
    """
    stack: list[tuple[str, Any]] = [(field, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            raise ValidationError(where, f"must be a finite number, got {item!r}; NaN and infinities cannot be "
                                         "stored or compared: use a finite number or a string")
        if isinstance(item, (list, tuple)):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
        elif isinstance(item, Mapping):
            stack.extend((f"{where}.{key}", sub) for key, sub in reversed(list(item.items())))
    return value


def check_tree(data: Any, *, source: str) -> Any:
    """``data`` unchanged if it nests at most ``MAX_DEPTH`` levels, holds at most ``MAX_VALUES`` values
    (aliases expanded) and no NaN or infinity; else one ``ValidationError`` naming ``source``.

    Each distinct list or mapping is walked once: one that a YAML alias
    repeats adds its size again without being walked again, so a small file
    that expands into billions of values is refused after a few steps.
    """
    sizes: dict[int, int] = {}  # id of a list or mapping walked -> values it holds, itself included
    entered: set[int] = set()
    stack: list[tuple[bool, int, str, Any]] = [(False, 0, "", data)]
    while stack:
        done, depth, where, item = stack.pop()
        if not isinstance(item, (list, Mapping)):
            if isinstance(item, float) and not math.isfinite(item):
                raise ValidationError(f"{source}: {where or 'value'}",
                                      f"must be a finite number, got {item!r}; use a finite number or a string")
            continue
        children = item.values() if isinstance(item, Mapping) else item
        if done:
            total = 1 + sum(sizes.get(id(sub), 1) for sub in children)
            if total > MAX_VALUES:
                raise ValidationError(source, f"holds more than {MAX_VALUES} values (YAML aliases included); "
                                              "split it into several files")
            sizes[id(item)] = total
            continue
        if id(item) in sizes:
            continue
        if depth >= MAX_DEPTH or id(item) in entered:  # an alias of itself nests without end
            raise _too_deep(source)
        entered.add(id(item))
        stack.append((True, depth, where, item))
        pairs = item.items() if isinstance(item, Mapping) else enumerate(item)
        for key, sub in reversed(list(pairs)):
            path = f"{where}[{key}]" if isinstance(item, list) else (f"{where}.{key}" if where else str(key))
            stack.append((False, depth + 1, path, sub))
    return data


def _json_depth_ok(text: str) -> bool:
    depth = 0
    for match in _JSON_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif token in "]}":
            depth -= 1
    return True


def _yaml_depth_ok(text: str) -> bool:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return True


def _size_ok(text: str) -> bool:
    return len(text) <= MAX_FILE_BYTES and len(text.encode("utf-8", "surrogatepass")) <= MAX_FILE_BYTES


def load_json_within_limits(text: str, *, source: str) -> Any:
    """Parse JSON ``text`` within the limits; errors are one ``ValidationError`` naming ``source``."""
    if not _size_ok(text):
        raise ValidationError(source, f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; split it")
    if not _json_depth_ok(text):
        raise _too_deep(source)
    try:
        data = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a refused constant, a 5,000-digit integer
        raise ValidationError(source, f"not valid JSON: {' '.join(str(exc).split())}") from None
    return check_tree(data, source=source)


def load_yaml_within_limits(text: str, *, source: str) -> Any:
    """Parse YAML ``text`` (safe subset) within the limits; errors are one ``ValidationError`` naming ``source``."""
    if not _size_ok(text):
        raise ValidationError(source, f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; split it")
    try:
        if not _yaml_depth_ok(text):
            raise _too_deep(source)
        data = yaml.safe_load(text)
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        if isinstance(exc, ValidationError):
            raise
        raise ValidationError(source, f"not valid YAML: {' '.join(str(exc).split())}") from None
    return check_tree(data, source=source)


def read_text_within_size(path: Path) -> str:
    """The UTF-8 text of ``path``, refusing files over ``MAX_FILE_BYTES`` before reading them whole."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ValidationError(str(path), f"cannot read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ValidationError(str(path), f"is larger than {MAX_FILE_BYTES // (1024 * 1024)} MB; split it")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(str(path), f"is not UTF-8 text ({exc.reason})") from None
