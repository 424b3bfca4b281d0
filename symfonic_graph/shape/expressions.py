"""Rule expressions in CEL (the Common Expression Language), compiled once and evaluated safely.

A fact, check or limit rule holds a CEL expression over these variables:
``args`` (the action call's arguments), ``result`` (an earlier call's parsed
result), ``call`` (that earlier call's arguments), ``state`` (the turn's state;
missing means an empty map) and ``now`` (a UTC timestamp). The runtime is the
``common-expression-language`` package (see docs/decisions.md, "CEL runtime").

One addition to standard CEL: ``timestamp("2024-05-15T10:00:00")``, a string
without a zone, is read as UTC (recorded data often has no zone).

Example:
    >>> from datetime import datetime, timezone
    >>> expr = compile_expression('args.passengers.size() <= 5', "check.where")
    >>> evaluate(expr, {"args": {"passengers": [1, 2]}})
    True
    >>> evaluate(compile_expression('timestamp("2024-05-15T10:00:00") < now', "w"),
    ...          {"now": datetime(2024, 5, 15, 15, tzinfo=timezone.utc)})
    True
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from threading import Lock
from types import MappingProxyType
from typing import Any, Final

import cel

from symfonic_graph.errors import ValidationError

__all__ = ["MAX_EXPRESSION", "NO_ARGUMENTS", "Expression", "ExpressionError", "Scope", "arguments", "bindable",
           "bindable_fields", "compile_expression", "evaluate", "evaluate_bool", "expression_problem"]

MAX_EXPRESSION: Final = 2_000
"""The longest expression text a rule holds, in characters."""
_UTC_TIMESTAMP: Final = "symfonic_utc_timestamp"
_CACHE_SIZE: Final = 4_096
_IDENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ExpressionError(Exception):
    """An expression could not be evaluated (a missing field, a wrong type, a non-boolean result)."""


@dataclass(frozen=True, slots=True, eq=False)
class Expression:
    """A compiled CEL expression and its text (what messages and pre-flight show)."""

    text: str
    program: Any
    names: frozenset[str] = frozenset()
    """The variables the expression reads (only those are bound when it is evaluated)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Expression) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def _utc(value: object) -> datetime:
    """``timestamp(x)`` for a string with or without a zone (zone-less is UTC), or a timestamp."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if not isinstance(value, str):
        raise TypeError(f"timestamp() takes a string, got {type(value).__name__}")
    text = value.strip()
    parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _rewritten(text: str) -> str:
    """``text`` with each call of ``timestamp(`` outside string literals sent to the zone-tolerant function."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in "\"'":
            raw = i > 0 and text[i - 1] in "rR"
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else ch
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                j += 2 if text[j] == "\\" and not raw else 1
            j = min(n, j + len(quote))
            out.append(text[i:j])
            i = j
            continue
        match = _IDENT.match(text, i)
        if match is None:
            out.append(ch)
            i += 1
            continue
        word, end = match.group(), match.end()
        after = end
        while after < n and text[after] in " \t\r\n":
            after += 1
        dotted = i > 0 and text[i - 1] == "."
        out.append(_UTC_TIMESTAMP if word == "timestamp" and not dotted and text[after:after + 1] == "(" else word)
        i = end
    return "".join(out)


class _OwnFailures(logging.Filter):
    """Drops the runtime's WARNING for a failure of our ``timestamp()``: the gate reports it, naming the rule."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _UTC_TIMESTAMP not in record.getMessage()


logging.getLogger("cel").addFilter(_OwnFailures())

_cache: OrderedDict[str, Expression | str] = OrderedDict()
_lock = Lock()


def _compiled(text: str) -> Expression | str:
    with _lock:
        hit = _cache.get(text)
        if hit is not None:
            _cache.move_to_end(text)
            return hit
    if len(text) > MAX_EXPRESSION:
        out: Expression | str = f"is {len(text)} characters long; an expression takes at most {MAX_EXPRESSION}"
    elif not text.strip():
        out = "is empty"
    else:
        try:
            program = cel.compile(_rewritten(text))
            out = Expression(text, program, frozenset(program.variables()))
        except Exception as exc:  # the runtime's parse error: one line, without the caret picture
            first = str(exc).replace(_UTC_TIMESTAMP, "timestamp").splitlines()
            out = "does not compile as CEL: " + (first[0] if first else type(exc).__name__)
    with _lock:
        _cache[text] = out
        if len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return out


def expression_problem(text: object) -> str | None:
    """Why ``text`` is no usable expression (not a string, empty, too long, does not compile), or None."""
    if not isinstance(text, str):
        return f"is not a string (got {type(text).__name__})"
    compiled = _compiled(text)
    return compiled if isinstance(compiled, str) else None


def compile_expression(text: object, field: str) -> Expression:
    """``text`` compiled (cached by text); a write's error names ``field``.

    Raises:
        ValidationError: the text is no string, is empty or too long, or does not compile.

    Example:
        >>> compile_expression("args.x >", "check.where")
        Traceback (most recent call last):
        ...
        symfonic_graph.errors.ValidationError: check.where: does not compile as CEL: ...
    """
    if not isinstance(text, str):
        raise ValidationError(field, f"must be a CEL expression (a string), got {type(text).__name__}")
    compiled = _compiled(text)
    if isinstance(compiled, str):
        raise ValidationError(field, compiled)
    return compiled


_SCALARS: Final = (str, int, float, bool, datetime, type(None))
_DROP: Final = object()


def _value(value: object, depth: int = 0) -> object:
    """A JSON-like value as CEL takes it (tuples as lists, keys as strings); what CEL cannot hold is left out."""
    if isinstance(value, _SCALARS):
        return value
    if depth > 32:
        return _DROP
    if isinstance(value, Mapping):
        items = ((str(k), _value(v, depth + 1)) for k, v in value.items())
        return {k: v for k, v in items if v is not _DROP}
    if isinstance(value, (list, tuple)):
        return [v for v in (_value(v, depth + 1) for v in value) if v is not _DROP]
    return _DROP


NO_ARGUMENTS: Final[Mapping[str, Any]] = MappingProxyType({})
"""What a call's unreadable arguments read as: an empty map."""


def arguments(value: object) -> Mapping[str, Any]:
    """A call's arguments as every rule reads them: ``value`` when it is a mapping, else (None: the provider sent
    none or unparseable ones; any other shape) an empty map, so a call is decided the same whatever came before.

    Example:
        >>> arguments({"amount": 3}), dict(arguments(None)), dict(arguments([1, 2]))
        ({'amount': 3}, {}, {})
    """
    return value if type(value) is dict or isinstance(value, Mapping) else NO_ARGUMENTS


def bindable(value: object) -> object:
    """``value`` as an expression reads it: JSON-like data only (objects such as messages are left out).

    Example:
        >>> bindable({"tier": "gold", "messages": [object()], "n": (1, 2)})
        {'tier': 'gold', 'messages': [], 'n': [1, 2]}
    """
    out = _value(value)
    return None if out is _DROP else out


def bindable_fields(value: object, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """The ``fields`` of ``bindable(value)`` (those it has, in ``fields`` order), converting only them; None when
    ``value`` is no ``dict`` keyed by strings only (then only converting it whole gives the same keys).

    Example:
        >>> bindable_fields({"amount": (1, 2), "note": "n" * 900}, ("amount", "currency"))
        {'amount': [1, 2]}
    """
    if type(value) is not dict:
        return None
    for key in value:
        if type(key) is not str:
            return None
    out: dict[str, Any] = {}
    for name in fields:
        if name in value:
            converted = _value(value[name], 1)
            if converted is not _DROP:
                out[name] = converted
    return out


class Scope:
    """Variables bound once and read by many evaluations (an earlier call's ``result`` and ``call``).

    Converting a large result into the runtime costs tens of microseconds; a
    ``Scope`` pays it once. Evaluations through one scope are serialised by a lock.
    """

    __slots__ = ("_context", "_held", "_lock", "names")

    def __init__(self, variables: Mapping[str, Any]) -> None:
        self._context = cel.Context()
        self._context.add_function(_UTC_TIMESTAMP, _utc)
        for name, value in variables.items():
            self._context.add_variable(name, value)
        self.names = frozenset(variables)
        self._held: dict[str, Any] = {}  # what each other name is bound to now (None: nothing of a call)
        self._lock = Lock()

    def evaluate(self, expression: Expression, variables: Mapping[str, Any]) -> Any:
        """The value of ``expression`` over this scope's variables and ``variables`` (bindable values).

        Each evaluation sees exactly ``variables`` besides the scope's own:
        a name it reads and ``variables`` lacks is bound to None, so nothing of
        one call's arguments reaches the next. A value bound by the previous
        evaluation (the same object: one decision's ``args`` read by several
        rules) is not converted again.

        Raises:
            ExpressionError: it could not be evaluated, saying why.
        """
        with self._lock:
            for name in expression.names:
                if name in self.names:
                    continue
                value = variables.get(name)
                if name not in self._held or self._held[name] is not value:
                    self._held.pop(name, None)  # unknown until bound: a failed binding is retried next time
                    self._context.add_variable(name, value)
                    self._held[name] = value
            try:
                return expression.program.execute(self._context)
            except Exception as exc:
                raise ExpressionError(_why(exc)) from None


def evaluate(expression: Expression, variables: Mapping[str, Any]) -> Any:
    """The value of ``expression`` over ``variables`` (values already :func:`bindable`; only those it reads are bound).

    Raises:
        ExpressionError: it could not be evaluated (a missing field, a wrong type, ...), saying why.
    """
    context = cel.Context()
    context.add_function(_UTC_TIMESTAMP, _utc)
    return _run(expression, context, variables)


def _run(expression: Expression, context: Any, variables: Mapping[str, Any]) -> Any:
    """Bind the variables ``expression`` reads into ``context`` and evaluate it there."""
    for name in expression.names:
        if name in variables:
            context.add_variable(name, variables[name])
    try:
        return expression.program.execute(context)
    except Exception as exc:
        raise ExpressionError(_why(exc)) from None


def evaluate_bool(expression: Expression, variables: Mapping[str, Any], scope: Scope | None = None) -> bool:
    """``evaluate`` (in ``scope`` when given) when the value is a boolean.

    Raises:
        ExpressionError: it could not be evaluated, or its value is no boolean.
    """
    value = evaluate(expression, variables) if scope is None else scope.evaluate(expression, variables)
    if value is not True and value is not False:
        raise ExpressionError(f"the expression gave {type(value).__name__} {value!r:.60}, not true or false")
    return value


def _why(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"no field {exc.args[0]!r}" if exc.args else "a missing field"
    text = str(exc).replace(_UTC_TIMESTAMP, "timestamp")
    if "No such overload" in text:
        return "no such overload (a value has the wrong type)"
    called = re.search(r"Python function call failed: (.*?)\. Check function", text)
    if called:
        return f"timestamp(): {called.group(1)}"
    first = text.splitlines()[0] if text else type(exc).__name__
    return first[:200]
