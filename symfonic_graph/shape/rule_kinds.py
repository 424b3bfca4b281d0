"""Precondition kinds over what earlier calls returned, the action's arguments, and counts.

* ``FactPrecondition`` (``fact``): an earlier successful call of ``tool`` (with
  ``same_args`` equal) whose result satisfies ``where`` (CEL). ``latest`` looks
  at the most recent such call only; ``voided_by`` tools cancel it when called
  later; ``within="user_turn"`` counts only calls after the user's latest message.
* ``CheckPrecondition`` (``check``): ``where`` holds over ``args``, ``state`` and ``now``.
* ``AnyPrecondition`` (``any``): one alternative holds: a tool called, a fact, a check.
* ``LimitPrecondition`` (``limit``): the action runs at most ``max_calls`` times,
  or while the sum of ``sum`` over its runs stays within ``max_sum``, per
  conversation, end user (``namespace``) or ``tenant``, in a sliding ``window``.

In the graph each is one ``:Precondition`` node with native properties (``where``,
``message``, ``latest``, ``voided_by``, ``same_args`` with ``same_args_from``,
``max_calls``, ``max_sum``, ``sum``, ``per``, ``window``); an ``any`` keeps its tool
names in ``tools`` and its facts and checks, as JSON, in ``alternatives``.

Example:
    >>> from symfonic_graph.shape.records import precondition_from_input
    >>> fact = precondition_from_input({"fact": {"tool": "get_reservation_details",
    ...     "same_args": ["reservation_id"], "where": 'result.cabin == "business"'}}, "p[0]")
    >>> fact.same_args, fact.node()["where"]
    ((('reservation_id', 'reservation_id'),), 'result.cabin == "business"')
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal

from symfonic_graph.errors import ValidationError
from symfonic_graph.shape._entry import ARG_NAME, WITHIN, UnreadablePrecondition, _Entry, _keys, _names
from symfonic_graph.shape._validate import text_within_property_bytes as _text
from symfonic_graph.shape._validate import tool_name as _tool_name
from symfonic_graph.shape.expressions import Expression, compile_expression, expression_problem
from symfonic_graph.shape.names import TOOL_NAME_RULE, bare_identifier, tool_name_problem

__all__ = ["PER", "AnyPrecondition", "CheckPrecondition", "FactPrecondition", "LimitPrecondition",
           "window_seconds"]

PER: Final = ("conversation", "namespace", "tenant")
_WINDOW: Final = re.compile(r"^\s*(?:\d+(?:\.\d+)?\s*[dhms]\s*)+$")
_WINDOW_PART: Final = re.compile(r"(\d+(?:\.\d+)?)\s*([dhms])")
_UNIT: Final = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}


def window_seconds(window: str) -> float | None:
    """``"24h"``, ``"1h30m"``, ``"7d"`` in seconds; None when it is no such duration.

    Example:
        >>> window_seconds("1h30m"), window_seconds("tomorrow")
        (5400.0, None)
    """
    if not isinstance(window, str) or not _WINDOW.match(window):
        return None
    seconds = sum(float(n) * _UNIT[u] for n, u in _WINDOW_PART.findall(window))
    return seconds if seconds > 0 else None


def _body(item: Mapping[str, Any], key: str, field: str) -> tuple[Mapping[str, Any], str]:
    """The fields of ``{key: {...}}`` or of a flat ``{"kind": key, ...}``, and the field path naming them."""
    if key in item:
        _keys(field, item, {"kind", key})
        value = item[key]
        if not isinstance(value, Mapping):
            raise ValidationError(f"{field}.{key}", "must be a mapping of the rule's fields")
        return value, f"{field}.{key}"
    return {k: v for k, v in item.items() if k != "kind"}, field


def _message(field: str, value: object) -> str | None:
    return None if value is None else _text(f"{field}.message", value)


def _where(field: str, value: object, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    return compile_expression(value, f"{field}.where").text


def _pairs_input(field: str, value: object) -> tuple[tuple[str, str], ...]:
    """``same_args`` as (action argument, earlier argument) pairs: a list of names, or a mapping."""
    if value is None:
        return ()
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (list, tuple)):
        pairs = [(name, name) for name in value]
    else:
        raise ValidationError(f"{field}.same_args", "must be a list of argument names or a mapping "
                                                    "{action_argument: earlier_argument}")
    for ours, theirs in pairs:
        for name in (ours, theirs):
            if not isinstance(name, str) or not ARG_NAME.match(name):
                raise ValidationError(f"{field}.same_args", f"{name!r} is not an argument name")
    return tuple(dict.fromkeys((str(a), str(b)) for a, b in pairs))


def _pairs_node(ours: object, theirs: object) -> tuple[tuple[str, str], ...] | None:
    names, earlier = _names(ours), _names(theirs)
    if names is None or earlier is None or (earlier and len(earlier) != len(names)):
        return None
    if not all(ARG_NAME.match(n) for n in (*names, *earlier)):
        return None
    return tuple(zip(names, earlier or names, strict=True))


class FactPrecondition(_Entry):
    """An earlier successful call of ``tool`` whose result satisfies ``where``."""

    role: ClassVar[str] = "requirement"
    item_key: ClassVar[str] = "fact"
    kind: Literal["fact"] = "fact"
    tool: str
    same_args: tuple[tuple[str, str], ...] = ()
    where: str | None = None
    latest: bool = False
    voided_by: tuple[str, ...] = ()
    within: Literal["conversation", "user_turn"] = "conversation"
    message: str | None = None

    @property
    def expression(self) -> Expression | None:
        """``where`` compiled (cached by its text); None without one."""
        return None if self.where is None else compile_expression(self.where, "where")

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> FactPrecondition:
        body, field = _body(item, "fact", field)
        _keys(field, body, {"tool", "same_args", "where", "latest", "voided_by", "within", "message"})
        within = body.get("within") or "conversation"
        if within not in WITHIN:
            raise ValidationError(f"{field}.within", f"must be one of {list(WITHIN)}, got {within!r}")
        latest = body.get("latest", False)
        if not isinstance(latest, bool):
            raise ValidationError(f"{field}.latest", f"must be true or false, got {latest!r}")
        voided = body.get("voided_by") or ()
        if isinstance(voided, str) or not isinstance(voided, (list, tuple)):
            raise ValidationError(f"{field}.voided_by", "must be a list of tool names")
        return cls(tool=_tool_name(f"{field}.tool", body.get("tool")),
                   same_args=_pairs_input(field, body.get("same_args")),
                   where=_where(field, body.get("where"), required=False), latest=latest,
                   voided_by=tuple(_tool_name(f"{field}.voided_by[{i}]", t) for i, t in enumerate(voided)),
                   within=within, message=_message(field, body.get("message")))

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> _Entry:
        tool = props.get("tool")
        if not isinstance(tool, str) or bare_identifier(tool) is None:
            return UnreadablePrecondition(reason=f"tool: {tool_name_problem(tool)}")
        pairs = _pairs_node(props.get("same_args"), props.get("same_args_from"))
        if pairs is None:
            return UnreadablePrecondition(reason=f"same_args: {props.get('same_args')!r} / same_args_from: "
                                                 f"{props.get('same_args_from')!r} are no matching lists of names")
        voided = _names(props.get("voided_by"))
        if voided is None:
            return UnreadablePrecondition(reason=f"voided_by: {props.get('voided_by')!r} is not a list of tool names")
        within, latest = props.get("within") or "conversation", props.get("latest")
        if within not in WITHIN:
            return UnreadablePrecondition(reason=f"within: {within!r} is not one of {list(WITHIN)}")
        if latest is not None and not isinstance(latest, bool):
            return UnreadablePrecondition(reason=f"latest: {latest!r} is not true or false")
        where, message = props.get("where"), props.get("message")
        if where is not None and not isinstance(where, str):
            return UnreadablePrecondition(reason=f"where: {where!r} is not a CEL expression")
        return cls(tool=tool.strip(), same_args=pairs, where=where, latest=bool(latest), voided_by=voided,
                   within=within, message=message if isinstance(message, str) else None)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> _Entry | None:
        value = item["fact"]
        if not isinstance(value, Mapping):
            return UnreadablePrecondition(reason=f"fact: {value!r} is not a mapping")
        try:
            return cls.from_input(item, "fact")
        except ValidationError as exc:
            return UnreadablePrecondition(reason=str(exc))

    def node(self) -> dict[str, Any]:
        same = self.same_args
        return {"tool": self.tool, "same_args": [a for a, _ in same] or None,
                "same_args_from": [b for _, b in same] if any(a != b for a, b in same) else None,
                "where": self.where, "latest": True if self.latest else None,
                "voided_by": list(self.voided_by) or None,
                "within": None if self.within == "conversation" else self.within, "message": self.message}

    def fields(self) -> dict[str, Any]:
        """The rule's fields as written (defaults left out)."""
        out: dict[str, Any] = {"tool": self.tool}
        if self.same_args:
            same = self.same_args
            out["same_args"] = dict(same) if any(a != b for a, b in same) else [a for a, _ in same]
        for key, value, default in (("where", self.where, None), ("latest", self.latest, False),
                                    ("voided_by", list(self.voided_by), []), ("within", self.within, "conversation"),
                                    ("message", self.message, None)):
            if value != default:
                out[key] = value
        return out

    def item(self, typed: bool = False) -> Any:
        return {"fact": self.fields()}

    def blocking(self) -> str | None:
        if bare_identifier(self.tool) is None:
            return f"tool: {tool_name_problem(self.tool)}"
        bad = next((t for t in self.voided_by if bare_identifier(t) is None), None)
        if bad is not None:
            return f"voided_by: {tool_name_problem(bad)}"
        problem = None if self.where is None else expression_problem(self.where)
        return None if problem is None else f"where {problem}"


class CheckPrecondition(_Entry):
    """``where`` holds over the action's ``args``, ``state`` and ``now`` (no earlier call needed)."""

    role: ClassVar[str] = "requirement"
    item_key: ClassVar[str] = "check"
    kind: Literal["check"] = "check"
    where: str
    message: str | None = None

    @property
    def expression(self) -> Expression:
        """``where`` compiled (cached by its text)."""
        return compile_expression(self.where, "where")

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> CheckPrecondition:
        body, field = _body(item, "check", field)
        _keys(field, body, {"where", "message"})
        return cls(where=_where(field, body.get("where"), required=True), message=_message(field, body.get("message")))

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> _Entry:
        where, message = props.get("where"), props.get("message")
        if not isinstance(where, str):
            return UnreadablePrecondition(reason=f"where: {where!r} is not a CEL expression")
        return cls(where=where, message=message if isinstance(message, str) else None)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> _Entry | None:
        try:
            return cls.from_input(item, "check")
        except ValidationError as exc:
            return UnreadablePrecondition(reason=str(exc))

    def node(self) -> dict[str, Any]:
        return {"where": self.where, "message": self.message}

    def item(self, typed: bool = False) -> Any:
        return {"check": {"where": self.where, **({"message": self.message} if self.message else {})}}

    def blocking(self) -> str | None:
        problem = expression_problem(self.where)
        return None if problem is None else f"where {problem}"


Alternative = FactPrecondition | CheckPrecondition


class AnyPrecondition(_Entry):
    """One alternative holds: a call of one of ``tools``, or one of the facts and checks in ``alternatives``."""

    role: ClassVar[str] = "requirement"
    item_key: ClassVar[str] = "any"
    kind: Literal["any"] = "any"
    tools: tuple[str, ...] = ()
    alternatives: tuple[Alternative, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """The bare identifiers among ``tools``, without repeats."""
        return tuple(dict.fromkeys(n for n in map(bare_identifier, self.tools) if n is not None))

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> AnyPrecondition:
        _keys(field, item, {"kind", "any", "tools"})
        entries = item.get("any", item.get("tools"))
        if isinstance(entries, str) or not isinstance(entries, (list, tuple)) or not entries:
            raise ValidationError(f"{field}.any", "must be a non-empty list of tool names, facts and checks")
        tools: list[str] = []
        alternatives: list[Alternative] = []
        for i, entry in enumerate(entries):
            where = f"{field}.any[{i}]"
            if isinstance(entry, Mapping) and ("fact" in entry or entry.get("kind") == "fact"):
                alternatives.append(FactPrecondition.from_input(entry, where))
            elif isinstance(entry, Mapping) and ("check" in entry or entry.get("kind") == "check"):
                alternatives.append(CheckPrecondition.from_input(entry, where))
            elif isinstance(entry, Mapping) and set(entry) <= {"tool", "kind"} and entry.get("kind", "tool") == "tool":
                tools.append(_tool_name(f"{where}.tool", entry.get("tool")))
            elif isinstance(entry, Mapping):
                raise ValidationError(where, 'must be a tool name, {"fact": {...}} or {"check": {...}}')
            else:
                tools.append(_tool_name(where, entry))
        return cls(tools=tuple(tools), alternatives=tuple(alternatives))

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> _Entry:
        alternatives = cls._alternatives(props.get("alternatives"))
        if isinstance(alternatives, UnreadablePrecondition):
            return alternatives
        return cls._group(props.get("tools"), "tools", alternatives)

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> _Entry | None:
        value = item["any"]
        if isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value):
            try:
                return cls.from_input({"any": value}, "any")
            except ValidationError as exc:
                return UnreadablePrecondition(reason=str(exc))
        return cls._group(value, "any", ())

    @classmethod
    def _alternatives(cls, value: object) -> tuple[Alternative, ...] | UnreadablePrecondition:
        if value is None or value == "":
            return ()
        try:
            items = json.loads(value) if isinstance(value, str) else None
            if not isinstance(items, list):
                raise ValueError("not a JSON list")
            entry = cls.from_input({"any": items}, "alternatives")
        except (ValueError, ValidationError) as exc:
            return UnreadablePrecondition(reason=f"alternatives: {value!r:.80} is not a JSON list of facts and "
                                                 f"checks ({exc})")
        if entry.tools:
            return UnreadablePrecondition(reason="alternatives: holds a tool name (tool names go in `tools`)")
        return entry.alternatives

    @classmethod
    def _group(cls, value: object, field: str, alternatives: tuple[Alternative, ...]) -> _Entry:
        """A read group: unreadable (blocking) unless it holds a tool name or an alternative."""
        tools = _names(value)
        if tools is None or (not tools and not alternatives):
            return UnreadablePrecondition(reason=f"{field}: {value!r} is not a non-empty list of tool names")
        entry = cls(tools=tools, alternatives=alternatives)
        if not entry.names and not alternatives:
            return UnreadablePrecondition(reason=f"{field}: {list(tools)!r} holds no tool name ({TOOL_NAME_RULE})")
        return entry

    def node(self) -> dict[str, Any]:
        alternatives = [a.item() for a in self.alternatives]
        return {"tools": list(self.tools),
                "alternatives": json.dumps(alternatives, sort_keys=True) if alternatives else None}

    def item(self, typed: bool = False) -> Any:
        return {"any": [*self.tools, *(a.item() for a in self.alternatives)]}

    def blocking(self) -> str | None:
        if not self.names and not self.alternatives:
            return f"tools: {list(self.tools)!r} holds no tool name ({TOOL_NAME_RULE})"
        problems = [p for a in self.alternatives if (p := a.blocking()) is not None]
        return f"an alternative: {problems[0]}" if problems and len(problems) == len(self.alternatives) \
            and not self.names else None


class LimitPrecondition(_Entry):
    """The action runs at most ``max_calls`` times (or within ``max_sum`` of ``sum``) per scope and window."""

    role: ClassVar[str] = "requirement"
    item_key: ClassVar[str] = "limit"
    kind: Literal["limit"] = "limit"
    max_calls: int | None = None
    max_sum: float | None = None
    sum: str | None = None
    per: Literal["conversation", "namespace", "tenant"] = "conversation"
    window: str | None = None
    message: str | None = None

    @property
    def expression(self) -> Expression | None:
        """``sum`` compiled; None without one."""
        return None if self.sum is None else compile_expression(self.sum, "sum")

    @property
    def seconds(self) -> float | None:
        """The window in seconds; None without one."""
        return None if self.window is None else window_seconds(self.window)

    @classmethod
    def from_input(cls, item: Mapping[str, Any], field: str) -> LimitPrecondition:
        body, field = _body(item, "limit", field)
        _keys(field, body, {"max_calls", "max_sum", "sum", "per", "window", "message"})
        max_calls, max_sum, total = body.get("max_calls"), body.get("max_sum"), body.get("sum")
        if max_calls is not None and (isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1):
            raise ValidationError(f"{field}.max_calls", f"must be a whole number, at least 1; got {max_calls!r}")
        if max_sum is not None and (isinstance(max_sum, bool) or not isinstance(max_sum, (int, float))):
            raise ValidationError(f"{field}.max_sum", f"must be a number, got {max_sum!r}")
        if (max_sum is None) != (total is None):
            raise ValidationError(f"{field}.sum", "`max_sum` and `sum` (the CEL value each call adds) go together")
        if max_calls is None and max_sum is None:
            raise ValidationError(field, "needs `max_calls`, or `max_sum` with `sum`")
        per = body.get("per") or "conversation"
        if per not in PER:
            raise ValidationError(f"{field}.per", f"must be one of {list(PER)}, got {per!r}")
        window = body.get("window")
        if window is not None and window_seconds(window) is None:
            raise ValidationError(f"{field}.window", f"must be a duration such as 24h, 30m or 7d; got {window!r}")
        if window is not None and per == "conversation":
            raise ValidationError(f"{field}.window", "applies to per: namespace or tenant (a conversation's calls "
                                                     "are counted over the whole conversation)")
        return cls(max_calls=max_calls, max_sum=None if max_sum is None else float(max_sum),
                   sum=None if total is None else compile_expression(total, f"{field}.sum").text, per=per,
                   window=window, message=_message(field, body.get("message")))

    @classmethod
    def from_node(cls, props: Mapping[str, Any]) -> _Entry:
        fields = {k: props.get(k) for k in ("max_calls", "max_sum", "sum", "per", "window", "message")}
        try:
            return cls.from_input({"limit": {k: v for k, v in fields.items() if v is not None}}, "limit")
        except ValidationError as exc:
            return UnreadablePrecondition(reason=str(exc))

    @classmethod
    def from_item(cls, item: Mapping[str, Any]) -> _Entry | None:
        try:
            return cls.from_input(item, "limit")
        except ValidationError as exc:
            return UnreadablePrecondition(reason=str(exc))

    def node(self) -> dict[str, Any]:
        return {"max_calls": self.max_calls, "max_sum": self.max_sum, "sum": self.sum,
                "per": None if self.per == "conversation" else self.per, "window": self.window,
                "message": self.message}

    def item(self, typed: bool = False) -> Any:
        fields = {"max_calls": self.max_calls, "max_sum": self.max_sum, "sum": self.sum,
                  "per": None if self.per == "conversation" else self.per, "window": self.window,
                  "message": self.message}
        return {"limit": {k: v for k, v in fields.items() if v is not None}}

    def blocking(self) -> str | None:
        problem = None if self.sum is None else expression_problem(self.sum)
        return None if problem is None else f"sum {problem}"
