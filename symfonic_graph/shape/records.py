"""The precondition record: one typed union, read and written the same way everywhere.

A skill's preconditions are a list of typed entries, told apart by ``kind``:

* ``ToolPrecondition`` (``kind="tool"``): call ``tool`` first. ``same_args``
  binds the check to the data (only an earlier call whose named arguments
  equal the action call's counts); ``within="user_turn"`` only counts calls
  made after the user's latest message.
* ``AnyPrecondition`` (``kind="any"``): call any one of ``tools`` first.
* ``StatePrecondition`` (``kind="state"``): the skill applies only while the
  predicate holds in the graph state (``if_missing="apply"``: also when the
  state does not have the path).
* ``TextPrecondition`` (``kind="text"``): advisory text, never enforced.
* ``UnreadablePrecondition``: a graph node that could not be read (or a tool
  entry whose name is no tool name). It is never satisfied, so its skill keeps
  blocking (fails closed), and it says why.

**A tool name** is 1 to 128 ASCII letters, digits, ``_``, ``-`` or ``.``: every
name OpenAI (``^[a-zA-Z0-9_-]{1,64}$``), Anthropic (``^[a-zA-Z0-9_-]{1,128}$``)
and MCP (1-128 of letters, digits, ``_``, ``-``, ``.``) accept. A *tool
reference* is a tool name, optionally followed by an argument list that is
ignored (``get_status(brand_id=<x>)`` names ``get_status``). Every path reads
names with :func:`bare_identifier` (references) and :func:`is_tool_name`
(exact names): writes, graph nodes, metadata, the gate, pre-flight and lint.

Every path builds entries here: writes and seed files (:func:`precondition_from_input`,
strict, errors name the field), graph reads (:func:`precondition_from_node`, lenient,
never raises) and duck-typed ``metadata`` (:func:`precondition_from_item`); the two lenient
readings live in ``readings.py``. Adding a kind is adding a class to the union and a branch to
each of those three functions.

Example:
    >>> precondition_from_input({"tool": "lookup_order", "same_args": ["order_id"]}, "precondition[0]")
    ToolPrecondition(kind='tool', tool='lookup_order', same_args=('order_id',), within='conversation')
    >>> precondition_from_input("Apologise first.", "precondition[1]").kind
    'text'
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import MAX_PRECONDITIONS

__all__ = [
    "AnyPrecondition",
    "Precondition",
    "StatePrecondition",
    "TextPrecondition",
    "ToolPrecondition",
    "UnreadablePrecondition",
    "bare_identifier",
    "is_tool_name",
    "precondition_from_input",
    "precondition_item",
    "precondition_node",
    "precondition_nodes",
]

STATE_OPS: Final = frozenset({"eq", "neq", "in", "exists"})
"""The state-predicate operators; a predicate with any other ``op`` is misconfigured (its skill blocks)."""
WITHIN: Final = ("conversation", "user_turn")
MAX_TOOL_NAME: Final = 128
TOOL_NAME_RULE: Final = (
    "a tool name is 1 to 128 ASCII letters, digits, '_', '-' or '.' (what OpenAI, Anthropic and MCP accept)")
"""The accepted character set, as every error and report states it."""
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.\-]{1,128}")
_TOOL_REFERENCE: Final = re.compile(r"([A-Za-z0-9_.\-]{1,128})\s*(\(.*\))?")
ARG_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SCALARS: Final = (str, int, float, bool)


def is_tool_name(value: object) -> bool:
    """True iff ``value`` is exactly a tool name (no blanks, no argument list).

    Example:
        >>> is_tool_name("issue-refund"), is_tool_name("mcp.orders.lookup"), is_tool_name("issue refund")
        (True, True, False)
    """
    return isinstance(value, str) and _TOOL_NAME.fullmatch(value) is not None


def bare_identifier(value: object) -> str | None:
    """The tool name of a tool reference (a name, optionally with an argument list), else None.

    Surrounding blanks are ignored. Anything with another character (a space,
    a comma, a non-ASCII letter) or a name over 128 characters is no reference.

    Example:
        >>> bare_identifier("  get_status(brand_id=<x>) ")
        'get_status'
        >>> bare_identifier("issue-refund"), bare_identifier("mcp.orders.lookup(id=1)")
        ('issue-refund', 'mcp.orders.lookup')
        >>> bare_identifier("Check the status first.") is None
        True
    """
    if not isinstance(value, str):
        return None
    match = _TOOL_REFERENCE.fullmatch(value.strip())
    return match.group(1) if match else None


def tool_name_problem(value: object) -> str:
    """Why ``value`` is no tool reference, in the words every error and report uses.

    Example:
        >>> tool_name_problem("issue refund")[:40]
        "'issue refund' is not a tool name (a too"
    """
    shown = repr(value) if not isinstance(value, str) or len(value) <= 80 else f"{value[:60]!r}... ({len(value)} chars)"
    return f"{shown} is not a tool name ({TOOL_NAME_RULE})"


def action_tool_problem(action_tool: object) -> str | None:
    """What a reader should know about a skill's ``action_tool`` property, or None when it names a tool.

    A blank or absent ``action_tool`` is no problem (``steps[0]`` is the guarded
    tool). Anything else that is no tool reference is reported: the gate then
    guards ``steps[0]`` when that is a tool name, else nothing.

    Example:
        >>> action_tool_problem("issue-refund") is None, action_tool_problem(None) is None
        (True, True)
        >>> action_tool_problem("issue refund").startswith("action_tool: 'issue refund' is not a tool name")
        True
    """
    if action_tool is None or (isinstance(action_tool, str) and not action_tool.strip()):
        return None
    if bare_identifier(action_tool) is not None:
        return None
    return f"action_tool: {tool_name_problem(action_tool)}: the gate guards steps[0] instead, if it is a tool name"


class _Entry(BaseModel):
    model_config = ConfigDict(frozen=True)


class ToolPrecondition(_Entry):
    """Call ``tool`` before the action; optionally with the same arguments, or in this user turn."""

    kind: Literal["tool"] = "tool"
    tool: str
    same_args: tuple[str, ...] = ()
    within: Literal["conversation", "user_turn"] = "conversation"

    @property
    def name(self) -> str | None:
        """The tool's bare identifier, or None when ``tool`` is not one (then nothing is enforced)."""
        return bare_identifier(self.tool)


class AnyPrecondition(_Entry):
    """Call any one of ``tools`` before the action."""

    kind: Literal["any"] = "any"
    tools: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The bare identifiers among ``tools``, without repeats (empty: contributes nothing)."""
        return tuple(dict.fromkeys(n for n in map(bare_identifier, self.tools) if n is not None))


class StatePrecondition(_Entry):
    """The skill applies only while ``path op value`` holds in the graph state.

    Kept whatever its path, op and value when read from the graph: a malformed
    predicate never holds, so it fails closed.
    """

    kind: Literal["state"] = "state"
    path: Any = None
    op: Any = None
    value: Any = None
    has_value: bool = True
    if_missing: Literal["apply"] | None = None

    def predicate(self) -> dict[str, Any]:
        """The ``{"path", "op", "value"?, "if_missing"?}`` mapping of the metadata view."""
        out: dict[str, Any] = {"path": self.path, "op": self.op}
        if self.has_value and self.op != "exists":
            out["value"] = self.value
        if self.if_missing is not None:
            out["if_missing"] = self.if_missing
        return out


class TextPrecondition(_Entry):
    """Advisory free text: shown to nobody by the gate, never enforced."""

    kind: Literal["text"] = "text"
    text: str


class UnreadablePrecondition(_Entry):
    """A graph node that could not be read: never satisfied, so its skill keeps blocking."""

    kind: Literal["unreadable"] = "unreadable"
    reason: str


Precondition = Annotated[
    ToolPrecondition | AnyPrecondition | StatePrecondition | TextPrecondition | UnreadablePrecondition,
    Field(discriminator="kind"),
]
"""One precondition entry of a skill."""


# --- writes: strict, every error names its field ------------------------------------


def _text(field: str, value: object) -> str:
    return v.bounded(field, v.text(field, value))


def _tool_name(field: str, value: object) -> str:
    name = bare_identifier(value)
    if name is None and (isinstance(value, str) or value is None):
        raise ValidationError(field, f"must be a tool name such as `lookup_order` or `issue-refund`: "
                                     f"{tool_name_problem(value)}")
    return _text(field, value).strip()


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
    _tool_name(field, value)
    return str(value)


def string_entry(item: str, field: str | None) -> ToolPrecondition | TextPrecondition:
    """A string entry: a tool reference is a tool precondition, anything else advisory text.

    A reference ending in ``.`` (``Apologise.``) reads both ways: a write
    (``field`` given) refuses it, a lenient read takes it as a tool (fails closed).
    """
    if bare_identifier(item) is None:
        return TextPrecondition(text=item)
    if field is not None and item.strip().endswith("."):
        raise ValidationError(field, f"{item!r} reads both as a tool name and as a sentence: write "
                                     f'{{"tool": {item.strip()!r}}} or {{"text": {item!r}}}')
    return ToolPrecondition(tool=item.strip())


def state_value(field: str, value: object) -> Any:
    """A value Neo4j stores natively: a finite scalar or a list of scalars of one type."""
    if isinstance(value, str):
        return _text(field, value) if value else value
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


def _keys(field: str, item: Mapping[str, Any], allowed: set[str]) -> None:
    extra = sorted(str(k) for k in set(item) - allowed)
    if extra:
        raise ValidationError(field, f"unknown keys {extra} (allowed: {sorted(allowed)})")


def _tool_input(field: str, item: Mapping[str, Any]) -> ToolPrecondition:
    _keys(field, item, {"kind", "tool", "same_args", "within"})
    tool = _tool_name(f"{field}.tool", item.get("tool"))
    same = item.get("same_args", ())
    if same is None:
        same = ()
    if isinstance(same, str) or not isinstance(same, (list, tuple)):
        raise ValidationError(f"{field}.same_args", "must be a list of argument names")
    for i, name in enumerate(same):
        if not isinstance(name, str) or not ARG_NAME.match(name):
            raise ValidationError(f"{field}.same_args[{i}]", f"must be an argument name, got {name!r}")
    within = item.get("within", "conversation")
    if within is None:
        within = "conversation"
    if within not in WITHIN:
        raise ValidationError(f"{field}.within", f"must be one of {list(WITHIN)}, got {within!r}")
    return ToolPrecondition(tool=tool, same_args=tuple(dict.fromkeys(same)), within=within)


def _any_input(field: str, item: Mapping[str, Any]) -> AnyPrecondition:
    _keys(field, item, {"kind", "any", "tools"})
    tools = item.get("any", item.get("tools"))
    if isinstance(tools, str) or not isinstance(tools, (list, tuple)) or not tools:
        raise ValidationError(f"{field}.any", "must be a non-empty list of tool names")
    return AnyPrecondition(tools=tuple(_tool_name(f"{field}.any[{i}]", t) for i, t in enumerate(tools)))


def _state_input(field: str, state: object) -> StatePrecondition:
    if not isinstance(state, Mapping):
        raise ValidationError(field, "must be a mapping {path, op, value}")
    _keys(field, state, {"path", "op", "value", "if_missing"})
    path = _text(f"{field}.path", state.get("path"))
    if any(not seg for seg in path.split(".")):
        raise ValidationError(f"{field}.path", "must be dot-separated non-empty segments")
    op = state.get("op")
    if op not in STATE_OPS:
        raise ValidationError(f"{field}.op", f"must be one of {sorted(STATE_OPS)}, got {op!r}")
    if_missing = state.get("if_missing")
    if if_missing not in (None, "apply"):
        raise ValidationError(f"{field}.if_missing", f'must be "apply" or absent, got {if_missing!r}')
    if op == "exists":
        if "value" in state:
            raise ValidationError(f"{field}.value", "`exists` takes no value")
        return StatePrecondition(path=path, op=op, has_value=False, if_missing=if_missing)
    if "value" not in state:
        raise ValidationError(f"{field}.value", f"`{op}` needs a value")
    value = state_value(f"{field}.value", state["value"])
    if op == "in" and not isinstance(value, list):
        raise ValidationError(f"{field}.value", "`in` needs a list value")
    return StatePrecondition(path=path, op=op, value=value, if_missing=if_missing)


def precondition_from_input(item: object, field: str) -> Precondition:
    """One write-side entry, validated: errors are ``ValidationError`` naming ``field``.

    Accepted: a typed entry; a string (a tool reference is a tool precondition,
    anything else, e.g. with a space, advisory text; a reference ending in ``.``
    is refused as ambiguous); ``{"tool": T, "same_args"?, "within"?}``;
    ``{"any": [T, ...]}``; ``{"state": {path, op, value?, if_missing?}}``;
    ``{"text": "..."}``; or any of them with an explicit ``"kind"``.

    Example:
        >>> precondition_from_input({"any": ["sso_login", "verify_identity"]}, "p[0]").names
        ('sso_login', 'verify_identity')
    """
    if isinstance(item, (ToolPrecondition, AnyPrecondition, StatePrecondition, TextPrecondition)):
        return precondition_from_input(precondition_item(item, typed=True), field)
    if isinstance(item, UnreadablePrecondition):
        raise ValidationError(field, f"cannot write an unreadable precondition ({item.reason})")
    if isinstance(item, str):
        return string_entry(_text(field, item), field)
    if not isinstance(item, Mapping):
        raise ValidationError(
            field, 'must be a string, {"tool": name}, {"any": [names]}, {"state": {path, op, value}} or {"text": ...}'
        )
    kind = item.get("kind")
    if kind is None:
        kinds = [k for k in ("tool", "any", "state", "text") if k in item]
        if len(kinds) != 1:
            raise ValidationError(field, 'needs exactly one of the keys "tool", "any", "state", "text" (or a "kind")')
        kind = kinds[0]
    if kind == "tool":
        return _tool_input(field, item)
    if kind == "any":
        return _any_input(field, item)
    if kind == "state":
        if "state" in item:
            _keys(field, item, {"kind", "state"})
            return _state_input(f"{field}.state", item["state"])
        return _state_input(field, {k: v for k, v in item.items() if k != "kind"})
    if kind == "text":
        _keys(field, item, {"kind", "text"})
        return TextPrecondition(text=_text(f"{field}.text", item.get("text")))
    raise ValidationError(f"{field}.kind", f"must be one of tool, any, state, text; got {kind!r}")


def precondition_nodes(value: object) -> list[dict[str, Any]]:
    """A skill's ``precondition`` argument (None, one entry, or a list) as validated node rows, in order.

    Example:
        >>> [row["kind"] for row in precondition_nodes(["auth", "Be kind."])]
        ['tool', 'text']
    """
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_PRECONDITIONS:
            raise ValidationError(
                "precondition", f"has {len(value)} entries; a skill takes at most {MAX_PRECONDITIONS}")
        return [precondition_node(precondition_from_input(item, f"precondition[{i}]"), i)
                for i, item in enumerate(value)]
    if not isinstance(value, (str, Mapping, BaseModel)):
        raise ValidationError("precondition", f"must be None, a string or a list, got {type(value).__name__}")
    return [precondition_node(precondition_from_input(value, "precondition"), 0)]


def precondition_node(entry: Precondition, position: int) -> dict[str, Any]:
    """The properties of the ``:Precondition`` node written for ``entry`` (every key present)."""
    row: dict[str, Any] = dict.fromkeys(
        ("tool", "same_args", "within", "tools", "path", "op", "value", "if_missing", "text"))
    row.update(kind=entry.kind, position=position)
    if isinstance(entry, ToolPrecondition):
        row.update(tool=entry.tool, same_args=list(entry.same_args) or None,
                   within=None if entry.within == "conversation" else entry.within)
    elif isinstance(entry, AnyPrecondition):
        row.update(tools=list(entry.tools))
    elif isinstance(entry, StatePrecondition):
        row.update(path=entry.path, op=entry.op, if_missing=entry.if_missing,
                   value=entry.value if entry.has_value and entry.op != "exists" else None)
    elif isinstance(entry, TextPrecondition):
        row.update(text=entry.text)
    return row


def precondition_item(entry: Precondition, *, typed: bool = False) -> Any:
    """The ``metadata["precondition"]`` item of ``entry``.

    A plain tool is its name and advice its text; ``typed=True`` keeps
    the kind explicit (``{"text": ...}``) so that reading it back cannot guess wrong.
    """
    if isinstance(entry, ToolPrecondition):
        if not entry.same_args and entry.within == "conversation":
            return {"tool": entry.tool} if typed else entry.tool
        out: dict[str, Any] = {"tool": entry.tool}
        if entry.same_args:
            out["same_args"] = list(entry.same_args)
        if entry.within != "conversation":
            out["within"] = entry.within
        return out
    if isinstance(entry, AnyPrecondition):
        return {"any": list(entry.tools)}
    if isinstance(entry, StatePrecondition):
        return {"state": entry.predicate()}
    if isinstance(entry, TextPrecondition):
        return {"text": entry.text} if typed else entry.text
    return {"unreadable": entry.reason}
