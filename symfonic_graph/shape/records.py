"""The precondition record: one typed union, read and written the same way everywhere.

A skill's preconditions are a list of typed entries, told apart by ``kind``:

* ``ToolPrecondition`` (``kind="tool"``): call ``tool`` first. ``same_args``
  binds the check to the data (only an earlier call whose named arguments
  equal the action call's counts); ``within="user_turn"`` only counts calls
  made after the user's latest message.
* ``AnyPrecondition`` (``kind="any"``): call any one of ``tools`` first (or meet one of its facts and checks).
* ``FactPrecondition``, ``CheckPrecondition``, ``LimitPrecondition`` (``rule_kinds.py``): what an
  earlier call returned, the action's own arguments, and counts (CEL expressions).
* ``StatePrecondition`` (``kind="state"``): the skill applies only while the
  predicate holds in the graph state (``if_missing="apply"``: also when the
  state does not have the path).
* ``TextPrecondition`` (``kind="text"``): advisory text, never enforced.
* ``UnreadablePrecondition``: a graph node that could not be read (or a tool
  entry whose name is no tool name). It is never satisfied, so its skill keeps
  blocking (fails closed), and it says why.

Tool names are read by ``names.py`` (1 to 128 ASCII letters, digits, ``_``, ``-`` or ``.``).

**A kind is one class.** Each kind is an ``_Entry`` subclass registered with :func:`register_kind`:
it reads strict write input, stores its node properties, reads a node and a metadata item back
leniently (failing closed), and says why it cannot be enforced. Every path dispatches on ``KINDS``
(writes and seed files: :func:`precondition_from_input`; graph reads and ``metadata``: ``readings.py``);
a ``"condition"`` kind's evaluator is registered beside it in ``rules.preconditions``.

Example:
    >>> precondition_from_input({"tool": "lookup_order", "same_args": ["order_id"]}, "precondition[0]")
    ToolPrecondition(kind='tool', tool='lookup_order', same_args=('order_id',), within='conversation')
    >>> precondition_from_input("Apologise first.", "precondition[1]").kind
    'text'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import BaseModel, Field

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape._entry import ARG_NAME, WITHIN, UnreadablePrecondition, _Entry, _keys, _names
from symfonic_graph.shape._limits import MAX_PRECONDITIONS
from symfonic_graph.shape._validate import action_tool_input, state_value
from symfonic_graph.shape._validate import text_within_property_bytes as _text
from symfonic_graph.shape._validate import tool_name as _tool_name
from symfonic_graph.shape.names import (
    MAX_TOOL_NAME,
    TOOL_NAME_RULE,
    action_tool_problem,
    bare_identifier,
    is_tool_name,
    tool_name_problem,
)
from symfonic_graph.shape.rule_kinds import AnyPrecondition, CheckPrecondition, FactPrecondition, LimitPrecondition

__all__ = [
    "AnyPrecondition",
    "CheckPrecondition",
    "FactPrecondition",
    "LimitPrecondition",
    "Precondition",
    "StatePrecondition",
    "TextPrecondition",
    "ToolPrecondition",
    "UnreadablePrecondition",
    "KINDS",
    "MAX_TOOL_NAME",
    "TOOL_NAME_RULE",
    "NODE_COLUMNS",
    "action_tool_input",
    "action_tool_problem",
    "bare_identifier",
    "is_tool_name",
    "precondition_from_input",
    "precondition_item",
    "precondition_node",
    "precondition_nodes",
    "preconditions_from_input",
    "register_kind",
    "state_value",
    "tool_name_problem",
    "unregister_kind",
]

STATE_OPS: Final = frozenset({"eq", "neq", "in", "exists"})
"""The state-predicate operators; a predicate with any other ``op`` is misconfigured (its skill blocks)."""


class ToolPrecondition(_Entry):
    """Call ``tool`` before the action; optionally with the same arguments, or in this user turn."""

    role: ClassVar[str] = "requirement"
    item_key: ClassVar[str] = "tool"
    kind: Literal["tool"] = "tool"
    tool: str
    same_args: tuple[str, ...] = ()
    within: Literal["conversation", "user_turn"] = "conversation"

    @property
    def name(self) -> str | None:
        """The tool's bare identifier, or None when ``tool`` is not one (then nothing is enforced)."""
        return bare_identifier(self.tool)

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> ToolPrecondition:
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
        return cls(tool=tool, same_args=tuple(dict.fromkeys(same)), within=within)

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> Precondition:
        tool, same, within = props.get("tool"), _names(props.get("same_args")), props.get("within")
        if not isinstance(tool, str) or bare_identifier(tool) is None:
            return UnreadablePrecondition(reason=f"tool: {tool_name_problem(tool)}")
        if same is None or not all(ARG_NAME.match(n) for n in same):
            return UnreadablePrecondition(reason=f"same_args: {props.get('same_args')!r} is not a list of names")
        if within is not None and within not in WITHIN:
            return UnreadablePrecondition(reason=f"within: {within!r} is not one of {list(WITHIN)}")
        return cls(tool=tool.strip(), same_args=same, within=within or "conversation")

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Precondition | None:
        return cls.from_node(item)  # {"tool": T, "same_args"?, "within"?} reads as the node does

    def node(self) -> dict[str, Any]:
        return {"tool": self.tool, "same_args": list(self.same_args) or None,
                "within": None if self.within == "conversation" else self.within}

    def item(self, typed: bool = False) -> Any:
        if not self.same_args and self.within == "conversation":
            return {"tool": self.tool} if typed else self.tool
        out: dict[str, Any] = {"tool": self.tool}
        if self.same_args:
            out["same_args"] = list(self.same_args)
        if self.within != "conversation":
            out["within"] = self.within
        return out

    def blocking(self) -> str | None:
        return None if self.name is not None else f"tool: {tool_name_problem(self.tool)}"


class StatePrecondition(_Entry):
    """The skill applies only while ``path op value`` holds in the graph state.

    Kept whatever its path, op and value when read from the graph: a malformed
    predicate never holds, so it fails closed.
    """

    item_key: ClassVar[str] = "state"
    kind: Literal["state"] = "state"
    path: Any = None
    op: Any = None
    value: Any = None
    has_value: bool = True
    if_missing: Literal["apply"] | None = None

    def predicate(self) -> dict[str, Any]:
        """The ``{"path", "op", "value"?, "if_missing"?}`` mapping of the metadata view (and of reports)."""
        out: dict[str, Any] = {"path": self.path, "op": self.op}
        if self.has_value and self.op != "exists":
            out["value"] = self.value
        if self.if_missing is not None:
            out["if_missing"] = self.if_missing
        return out

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> StatePrecondition:
        if "state" in item:
            _keys(field, item, {"kind", "state"})
            return _state_input(f"{field}.state", item["state"])
        return _state_input(field, {k: v for k, v in item.items() if k != "kind"})

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> Precondition:
        return cls(path=props.get("path"), op=props.get("op"), value=props.get("value"),
                   has_value=props.get("value") is not None,
                   if_missing="apply" if props.get("if_missing") == "apply" else None)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Precondition:
        value = item["state"]
        if not isinstance(value, Mapping):
            return UnreadablePrecondition(reason=f"state: {value!r} is not a mapping {{path, op, value}}")
        return cls(path=value.get("path"), op=value.get("op"), value=value.get("value"),
                   has_value="value" in value, if_missing="apply" if value.get("if_missing") == "apply" else None)

    def node(self) -> dict[str, Any]:
        return {"path": self.path, "op": self.op, "if_missing": self.if_missing,
                "value": self.value if self.has_value and self.op != "exists" else None}

    def item(self, typed: bool = False) -> Any:
        return {"state": self.predicate()}

    def problem(self) -> str | None:
        """Why this predicate is misconfigured (it can never be evaluated), or None."""
        path, op = self.path, self.op
        if not isinstance(path, str) or not path or any(not seg for seg in path.split(".")):
            return f"path: {path!r} is not a dot path of non-empty segments"
        if not isinstance(op, str) or op not in STATE_OPS:
            return f"op: unknown op {op!r}"
        if op != "exists" and not self.has_value:
            return f"value: op {op!r} needs a value"
        if op == "in" and not isinstance(self.value, (list, tuple, set, frozenset)):
            return "value: op 'in' needs a list value"
        return None

    def blocking(self) -> str | None:
        problem = self.problem()
        return None if problem is None else f"a misconfigured state predicate ({problem})"

    def state_paths(self) -> tuple[str, ...] | None:
        return (self.path,) if isinstance(self.path, str) else ()

    def canonical(self) -> StatePrecondition:
        if self.op == "exists" and (self.has_value or self.value is not None):
            return self.model_copy(update={"value": None, "has_value": False})
        return self


class TextPrecondition(_Entry):
    """Advisory free text: shown to nobody by the gate, never enforced."""

    role: ClassVar[str] = "advice"
    item_key: ClassVar[str] = "text"
    kind: Literal["text"] = "text"
    text: str

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> TextPrecondition:
        _keys(field, item, {"kind", "text"})
        return cls(text=_text(f"{field}.text", item.get("text")))

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> Precondition:
        text = props.get("text")
        return cls(text=text if isinstance(text, str) else "")

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> Precondition | None:
        return cls(text=item["text"]) if isinstance(item["text"], str) else None

    def node(self) -> dict[str, Any]:
        return {"text": self.text}

    def item(self, typed: bool = False) -> Any:
        return {"text": self.text} if typed else self.text


Precondition = Annotated[
    ToolPrecondition | AnyPrecondition | StatePrecondition | TextPrecondition | FactPrecondition | CheckPrecondition
    | LimitPrecondition | UnreadablePrecondition,
    Field(discriminator="kind"),
]
"""One precondition entry of a skill: a record of one registered kind (the built-in ones are listed;
a kind registered later is an ``_Entry`` subclass the same way)."""

NODE_COLUMNS: Final = ("tool", "same_args", "within", "tools", "path", "op", "value", "if_missing", "text",
                       "same_args_from", "where", "latest", "voided_by", "message", "alternatives", "max_calls",
                       "max_sum", "sum", "per", "window")
"""The properties of a ``:Precondition`` node (besides ``kind`` and ``position``): every write stores, and
every read projects, exactly these; a kind keeps its content in them."""

KINDS: dict[str, type[_Entry]] = {}
"""Every precondition kind by name, in registration order (the order metadata shorthand keys are tried)."""


def register_kind(model: type[_Entry]) -> type[_Entry]:
    """Register a precondition kind (an ``_Entry`` subclass with a ``kind`` literal); returns it.

    Its node properties must be among ``NODE_COLUMNS`` (the graph stores no other).
    An evaluator for a ``"condition"`` kind is registered beside it with
    ``rules.preconditions.register_precondition``, which calls this.
    """
    kind = model.model_fields["kind"].default
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{model.__name__} needs a `kind` field with a string default")
    if model.role not in ("requirement", "condition", "advice"):
        raise TypeError(f"{model.__name__}.role must be requirement, condition or advice")
    if not model.item_key:
        model.item_key = kind
    KINDS[kind] = model
    return model


def unregister_kind(kind: str) -> None:
    """Forget a kind registered with :func:`register_kind` (tests); the built-in ones stay."""
    if kind not in _BUILT_IN:
        KINDS.pop(kind, None)


for _model in (ToolPrecondition, AnyPrecondition, StatePrecondition, TextPrecondition, FactPrecondition,
               CheckPrecondition, LimitPrecondition, UnreadablePrecondition):
    register_kind(_model)
_BUILT_IN: Final = frozenset(KINDS)


def _writable() -> list[str]:
    return [kind for kind, model in KINDS.items() if model.writable]


# --- writes: strict, every error names its field ------------------------------------


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
    ``{"text": "..."}``; any of them with an explicit ``"kind"``; or the
    shorthand of a registered kind. The kind's own ``from_input`` decides.

    Example:
        >>> precondition_from_input({"any": ["sso_login", "verify_identity"]}, "p[0]").names
        ('sso_login', 'verify_identity')
    """
    if isinstance(item, _Entry):
        if not type(item).writable:
            return type(item).from_input(item.model_dump(), field)  # type: ignore[return-value]  # a registered kind's record
        return precondition_from_input(item.item(typed=True), field)
    if isinstance(item, str):
        return string_entry(_text(field, item), field)
    writable = _writable()
    if not isinstance(item, Mapping):
        raise ValidationError(field, "must be a string, " + ", ".join(_SHAPES.get(k, f'{{"{k}": ...}}')
                                                                      for k in writable[:-1])
                              + f" or {_SHAPES.get(writable[-1], f'{{{writable[-1]!r}: ...}}')}")
    kind = item.get("kind")
    if kind is None:
        kinds = [k for k in writable if KINDS[k].item_key in item]
        if len(kinds) != 1:
            keys = ", ".join(f'"{KINDS[k].item_key}"' for k in writable)
            raise ValidationError(field, f'needs exactly one of the keys {keys} (or a "kind")')
        kind = kinds[0]
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None or not model.writable:
        raise ValidationError(f"{field}.kind", f"must be one of {', '.join(writable)}; got {kind!r}")
    return model.from_input(item, field)  # type: ignore[return-value]  # a registered kind's record


_SHAPES: Final = {"tool": '{"tool": name}', "any": '{"any": [names, facts, checks]}',
                  "state": '{"state": {path, op, value}}', "text": '{"text": ...}', "fact": '{"fact": {tool, where?}}',
                  "check": '{"check": {where}}', "limit": '{"limit": {max_calls, per?}}'}


def precondition_nodes(value: object) -> list[dict[str, Any]]:
    """A skill's ``precondition`` argument (None, one entry, or a list) as validated node rows, in order.

    Example:
        >>> [row["kind"] for row in precondition_nodes(["auth", "Be kind."])]
        ['tool', 'text']
    """
    return [precondition_node(entry, i) for i, entry in enumerate(preconditions_from_input(value))]


def preconditions_from_input(value: object, field: str = "precondition") -> tuple[Precondition, ...]:
    """A skill's ``precondition`` argument (None, one entry, or a list) as validated records, in order."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_PRECONDITIONS:
            raise ValidationError(field, f"has {len(value)} entries; a skill takes at most {MAX_PRECONDITIONS}")
        return tuple(precondition_from_input(item, f"{field}[{i}]") for i, item in enumerate(value))
    if not isinstance(value, (str, Mapping, BaseModel)):
        raise ValidationError(field, f"must be None, a string or a list, got {type(value).__name__}")
    return (precondition_from_input(value, field),)


def precondition_node(entry: Precondition, position: int) -> dict[str, Any]:
    """The properties of the ``:Precondition`` node written for ``entry`` (every column present)."""
    props = entry.node()
    stray = set(props) - set(NODE_COLUMNS)
    if stray:
        raise TypeError(f"kind {entry.kind!r} stores {sorted(stray)}: a node holds only {list(NODE_COLUMNS)}")
    return {**dict.fromkeys(NODE_COLUMNS), **props, "kind": entry.kind, "position": position}


def precondition_item(entry: Precondition, *, typed: bool = False) -> Any:
    """The ``metadata["precondition"]`` item of ``entry``.

    A plain tool is its name and advice its text; ``typed=True`` keeps
    the kind explicit (``{"text": ...}``) so that reading it back cannot guess wrong.
    """
    return entry.item(typed)
