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

from collections.abc import Mapping, Sequence
from typing import Any, Final

from symfonic_graph.shape.records import (
    ARG_NAME,
    STATE_OPS,
    TOOL_NAME_RULE,
    WITHIN,
    AnyPrecondition,
    Precondition,
    StatePrecondition,
    TextPrecondition,
    ToolPrecondition,
    UnreadablePrecondition,
    bare_identifier,
    string_entry,
    tool_name_problem,
)

__all__ = [
    "node_problem",
    "precondition_from_item",
    "precondition_from_node",
    "predicate_problem",
    "state_problem",
]


# --- graph reads: lenient, never raise ------------------------------------------------


def _names(value: object) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, Sequence):
        return None
    return tuple(value) if all(isinstance(v, str) for v in value) else None


def _any_entry(value: object, field: str) -> AnyPrecondition | UnreadablePrecondition:
    """A read ``any`` group: unreadable (blocking) unless it is a list of strings holding a tool name."""
    tools = _names(value)
    if not tools:
        return UnreadablePrecondition(reason=f"{field}: {value!r} is not a non-empty list of tool names")
    entry = AnyPrecondition(tools=tools)
    if not entry.names:
        return UnreadablePrecondition(reason=f"{field}: {list(tools)!r} holds no tool name ({TOOL_NAME_RULE})")
    return entry


def precondition_from_node(props: Mapping[str, Any]) -> Precondition:
    """The entry of one ``:Precondition`` node as seeded (by the library or by hand). Never raises.

    The node's ``kind`` decides (case-insensitively, surrounding blanks ignored):
    a ``text`` node is never enforced whatever its text. A node that cannot be
    read, a ``tool`` node whose ``tool`` is no tool name and an ``any`` node
    without one become an :class:`UnreadablePrecondition`: the skill keeps
    blocking its action (``doctor`` says why).

    Example:
        >>> precondition_from_node({"kind": "text", "text": "review"}).kind
        'text'
        >>> precondition_from_node({"kind": "tol", "tool": "x"}).reason
        "kind: unknown kind 'tol' (expected tool, any, state or text)"
    """
    raw_kind = props.get("kind")
    kind = raw_kind.strip().lower() if isinstance(raw_kind, str) else raw_kind
    if kind == "tool":
        tool, same, within = props.get("tool"), _names(props.get("same_args")), props.get("within")
        if not isinstance(tool, str) or bare_identifier(tool) is None:
            return UnreadablePrecondition(reason=f"tool: {tool_name_problem(tool)}")
        if same is None or not all(ARG_NAME.match(n) for n in same):
            return UnreadablePrecondition(reason=f"same_args: {props.get('same_args')!r} is not a list of names")
        if within is not None and within not in WITHIN:
            return UnreadablePrecondition(reason=f"within: {within!r} is not one of {list(WITHIN)}")
        return ToolPrecondition(tool=tool.strip(), same_args=same, within=within or "conversation")
    if kind == "any":
        return _any_entry(props.get("tools"), "tools")
    if kind == "state":
        if_missing = props.get("if_missing")
        return StatePrecondition(path=props.get("path"), op=props.get("op"), value=props.get("value"),
                                 has_value=props.get("value") is not None,
                                 if_missing="apply" if if_missing == "apply" else None)
    if kind == "text":
        text = props.get("text")
        return TextPrecondition(text=text if isinstance(text, str) else "")
    return UnreadablePrecondition(reason=f"kind: unknown kind {raw_kind!r} (expected tool, any, state or text)")


_BLOCKS: Final = "the skill blocks its action until this is fixed (fails closed)"


def node_problem(entry: Precondition) -> str | None:
    """What ``doctor`` reports about a read entry, or None when it is well formed.

    Example:
        >>> node_problem(StatePrecondition(path="channel", op="equals", value="web"))[:60]
        "op: unknown op 'equals': a misconfigured state predicate; th"
    """
    if isinstance(entry, UnreadablePrecondition):
        return f"{entry.reason}: {_BLOCKS}"
    if isinstance(entry, ToolPrecondition) and entry.name is None:
        return f"tool: {tool_name_problem(entry.tool)}: {_BLOCKS}"
    if isinstance(entry, AnyPrecondition):
        bad = [t for t in entry.tools if bare_identifier(t) is None]
        if not entry.names:
            return f"tools: {list(entry.tools)!r} holds no tool name ({TOOL_NAME_RULE}): {_BLOCKS}"
        if bad:
            return (f"tools: {bad!r} are not tool names ({TOOL_NAME_RULE}): only the others "
                    f"({', '.join(entry.names)}) meet the group")
    if isinstance(entry, StatePrecondition):
        problem = state_problem(entry)
        return None if problem is None else f"{problem}: a misconfigured state predicate; {_BLOCKS}"
    return None


def state_problem(entry: StatePrecondition) -> str | None:
    """Why a state entry is misconfigured (it can never be evaluated), or None."""
    return predicate_problem(entry.predicate())


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
    if not isinstance(predicate, Mapping):
        return f"state: {predicate!r} is not a mapping {{path, op, value}}"
    path, op = predicate.get("path"), predicate.get("op")
    if not isinstance(path, str) or not path or any(not seg for seg in path.split(".")):
        return f"path: {path!r} is not a dot path of non-empty segments"
    if not isinstance(op, str) or op not in STATE_OPS:
        return f"op: unknown op {op!r}"
    if op != "exists" and "value" not in predicate:
        return f"value: op {op!r} needs a value"
    if op == "in" and not isinstance(predicate["value"], (list, tuple, set, frozenset)):
        return "value: op 'in' needs a list value"
    return None


# --- the duck-typed metadata view, both directions ------------------------


def precondition_from_item(item: object) -> Precondition | None:
    """The entry of one duck-typed ``metadata["precondition"]`` item, or None when it contributes nothing.

    Lenient, and failing closed: a malformed state predicate is kept (its
    skill then blocks its action); a ``{"tool": X}`` or ``{"any": X}`` that
    names no tool, and a ``{"state": X}`` whose ``X`` is not a mapping, are
    unreadable (they block too).

    Example:
        >>> precondition_from_item("auth").kind, precondition_from_item("Be polite.").kind
        ('tool', 'text')
        >>> precondition_from_item({"tool": "verify identity"}).kind
        'unreadable'
    """
    if isinstance(item, (ToolPrecondition, AnyPrecondition, StatePrecondition, TextPrecondition,
                         UnreadablePrecondition)):
        return item
    if isinstance(item, str):
        return string_entry(item, None)
    if not isinstance(item, Mapping):
        return None
    if "state" in item:
        state = item["state"]
        if not isinstance(state, Mapping):
            return UnreadablePrecondition(reason=f"state: {state!r} is not a mapping {{path, op, value}}")
        if_missing = state.get("if_missing")
        return StatePrecondition(path=state.get("path"), op=state.get("op"), value=state.get("value"),
                                 has_value="value" in state, if_missing="apply" if if_missing == "apply" else None)
    if "any" in item:
        return _any_entry(item["any"], "any")
    if "tool" in item:
        tool = item["tool"]
        if not isinstance(tool, str) or bare_identifier(tool) is None:
            return UnreadablePrecondition(reason=f"tool: {tool_name_problem(tool)}")
        same = _names(item.get("same_args"))
        if same is None or not all(ARG_NAME.match(n) for n in same):
            return UnreadablePrecondition(reason=f"same_args: {item.get('same_args')!r} is not a list of names")
        within = item.get("within")
        if within not in (None, *WITHIN):
            return UnreadablePrecondition(reason=f"within: {within!r} is not one of {list(WITHIN)}")
        return ToolPrecondition(tool=tool.strip(), same_args=same, within=within or "conversation")
    if "text" in item and isinstance(item["text"], str):
        return TextPrecondition(text=item["text"])
    if "unreadable" in item:
        return UnreadablePrecondition(reason=str(item["unreadable"]))
    return None
