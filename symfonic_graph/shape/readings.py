"""The lenient readings of the precondition record: graph nodes and duck-typed metadata.

Both never raise and fail closed: what cannot be read becomes an
``UnreadablePrecondition``, which keeps its skill blocking and says why
(``doctor`` reports it through :func:`node_problem`). The strict reading of
write input, and the node properties a write stores, are in ``records.py``.

Example:
    >>> precondition_from_node({"kind": "Tool", "tool": "verify_identity"}).tool
    'verify_identity'
    >>> precondition_from_item({"any": ["lookup_order", "find_order"]}).kind
    'any'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from symfonic_graph.shape._entry import _Entry
from symfonic_graph.shape.names import TOOL_NAME_RULE
from symfonic_graph.shape.records import (
    KINDS,
    AnyPrecondition,
    Precondition,
    StatePrecondition,
    UnreadablePrecondition,
    bare_identifier,
    string_entry,
)

__all__ = [
    "node_problem",
    "precondition_from_item",
    "precondition_from_node",
    "predicate_problem",
    "state_problem",
]


# --- graph reads: lenient, never raise ------------------------------------------------


def precondition_from_node(props: Mapping[str, Any]) -> Precondition:
    """The entry of one ``:Precondition`` node as seeded (by the library or by hand). Never raises.

    The node's ``kind`` decides (case-insensitively, surrounding blanks ignored),
    and that kind's own ``from_node`` reads it: a ``text`` node is never enforced
    whatever its text. A node that cannot be read, a ``tool`` node whose ``tool``
    is no tool name and an ``any`` node without one become an
    :class:`UnreadablePrecondition`: the skill keeps blocking its action
    (``doctor`` says why).

    Example:
        >>> precondition_from_node({"kind": "text", "text": "review"}).kind
        'text'
        >>> precondition_from_node({"kind": "tol", "tool": "x"}).reason
        "kind: unknown kind 'tol' (expected tool, any, state, text, fact, check or limit)"
    """
    raw_kind = props.get("kind")
    kind = raw_kind.strip().lower() if isinstance(raw_kind, str) else raw_kind
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None or not model.writable:
        known = [k for k, m in KINDS.items() if m.writable]
        expected = ", ".join(known[:-1]) + f" or {known[-1]}"
        return UnreadablePrecondition(reason=f"kind: unknown kind {raw_kind!r} (expected {expected})")
    try:
        return model.from_node(props)  # type: ignore[return-value]  # a registered kind's record
    except Exception as exc:  # a registered kind's reader: never let it break a read
        return UnreadablePrecondition(reason=f"kind {kind!r}: not readable ({type(exc).__name__})")


_BLOCKS: Final = "the skill blocks its action until this is fixed (fails closed)"


def node_problem(entry: Precondition) -> str | None:
    """What ``doctor`` reports about a read entry, or None when it is well formed.

    Example:
        >>> node_problem(StatePrecondition(path="channel", op="equals", value="web"))[:60]
        "op: unknown op 'equals': a misconfigured state predicate; th"
    """
    if isinstance(entry, StatePrecondition):
        problem = entry.problem()
        return None if problem is None else f"{problem}: a misconfigured state predicate; {_BLOCKS}"
    if isinstance(entry, AnyPrecondition) and entry.names:
        bad = [t for t in entry.tools if bare_identifier(t) is None]
        return None if not bad else (f"tools: {bad!r} are not tool names ({TOOL_NAME_RULE}): only the others "
                                     f"({', '.join(entry.names)}) meet the group")
    blocking = entry.blocking()
    return None if blocking is None else f"{blocking}: {_BLOCKS}"


def state_problem(entry: StatePrecondition) -> str | None:
    """Why a state entry is misconfigured (it can never be evaluated), or None."""
    return entry.problem()


def predicate_problem(predicate: object) -> str | None:
    """Why a ``{"path", "op", "value"?}`` predicate is misconfigured, or None when it can be evaluated.

    A misconfigured predicate never decides whether its skill applies: the
    skill applies and its action stays blocked until an operator fixes it.

    Example:
        >>> predicate_problem({"path": "channel", "op": "equals", "value": "web"})
        "op: unknown op 'equals'"
        >>> predicate_problem({"path": "plan", "op": "in", "value": ["pro"]}) is None
        True
    """
    entry = StatePrecondition.from_item({"state": predicate})
    return entry.problem() if isinstance(entry, StatePrecondition) else entry.blocking()


# --- the duck-typed metadata view ------------------------------------------------------

_ITEM_FIRST: Final = ("state", "any", "tool")
"""Keys tried first when a metadata item holds several; the other kinds follow in registration order."""


def precondition_from_item(item: object) -> Precondition | None:
    """The entry of one duck-typed ``metadata["precondition"]`` item, or None when it contributes nothing.

    Lenient, and failing closed: a malformed state predicate is kept (its
    skill then blocks its action); a ``{"tool": X}`` or ``{"any": X}`` that
    names no tool, and a ``{"state": X}`` whose ``X`` is not a mapping, are
    unreadable (they block too). Each kind reads its own key (``item_key``).

    Example:
        >>> precondition_from_item("auth").kind, precondition_from_item("Be polite.").kind
        ('tool', 'text')
        >>> precondition_from_item({"tool": "verify identity"}).kind
        'unreadable'
    """
    if isinstance(item, _Entry):
        return item  # type: ignore[return-value]
    if isinstance(item, str):
        return string_entry(item, None)
    if not isinstance(item, Mapping):
        return None
    first = [KINDS[k] for k in _ITEM_FIRST if k in KINDS]
    for model in (*first, *(m for m in KINDS.values() if m not in first)):
        if model.item_key in item:
            try:
                entry = model.from_item(item)
            except Exception as exc:  # a registered kind's reader: fail closed
                return UnreadablePrecondition(reason=f"{model.item_key}: not readable ({type(exc).__name__})")
            if entry is not None:
                return entry  # type: ignore[return-value]  # a registered kind's record
    return None

