"""Deciding the rules over results, arguments and counts: fact, check, any-of and limit (pure).

Each requirement's outcome is one of:

* ``met``: it holds;
* ``missing``: an earlier call it needs was not made (the model can make it, then retry);
* ``refused``: it cannot hold for this call, whatever the model calls next ("not allowed");
* ``error``: an expression could not be evaluated (fails closed, saying why).

CEL variables: ``args`` (the action call's arguments), ``result`` and ``call`` (an
earlier call's parsed result and arguments), ``state`` (JSON-like values of the
turn's state; missing = ``{}``), ``now`` (a UTC timestamp).

Example:
    >>> from datetime import datetime, timezone
    >>> from symfonic_graph.rules.events import CallResult, History
    >>> from symfonic_graph.shape.rule_kinds import FactPrecondition
    >>> fact = FactPrecondition(tool="get_order", same_args=(("order_id", "order_id"),),
    ...                         where='result.status == "pending"', message="Only pending orders can be cancelled.")
    >>> history = History((CallResult("get_order", {"order_id": "7"}, False, 1, '{"status": "delivered"}'),), 1)
    >>> now = datetime(2024, 5, 15, tzinfo=timezone.utc)
    >>> fact_outcome(fact, {"order_id": "7"}, history, Bindings({}, now))
    Outcome(status='refused', detail='Only pending orders can be cancelled.')
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, overload

from symfonic_graph.rules.events import CallResult, History
from symfonic_graph.rules.preconditions import same_arguments
from symfonic_graph.shape.expressions import (
    Expression,
    ExpressionError,
    Scope,
    arguments,
    bindable,
    bindable_fields,
    evaluate,
    evaluate_bool,
)
from symfonic_graph.shape.names import bare_identifier
from symfonic_graph.shape.rule_kinds import AnyPrecondition, CheckPrecondition, FactPrecondition, LimitPrecondition

__all__ = ["Bindings", "Outcome", "any_outcome", "check_outcome", "fact_outcome", "limit_amount", "limit_outcome",
           "utc_now"]

log = logging.getLogger("symfonic_graph.gate")

Status = Literal["met", "missing", "refused", "error"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """A requirement's outcome for one call, and what to tell the model (a phrase, a message, or why)."""

    status: Status
    detail: str = ""


MET = Outcome("met")


def utc_now() -> datetime:
    """The current time, in UTC (the gate's clock unless a ``now`` is given)."""
    return datetime.now(UTC)


_PENDING: Any = object()  # ``args`` seen but not converted whole yet
_UNSEEN: Any = object()  # no ``args`` seen yet (None is a call's unreadable arguments, not "nothing seen")


class Bindings:
    """What the expressions of one decision read besides ``args``: the state and the clock (converted once).

    Arguments that cannot be read (None, or no mapping) are read as ``{}``, whatever was read before.
    """

    __slots__ = ("_args", "_full", "_scopes", "_state", "_values", "now", "raw_state")

    def __init__(self, state: object, now: datetime) -> None:
        self.raw_state = state
        self.now = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
        self._state: Any = None
        self._args: object = _UNSEEN
        self._full: Any = _PENDING  # ``args`` converted whole (``_PENDING``: not yet)
        self._scopes: dict[Reads, Scope] = {}
        self._values: dict[Reads, dict[str, Any]] = {}

    def _seen(self, args: object) -> None:
        """Make ``args`` the call's arguments (a new ``args`` forgets what was bound of the previous one)."""
        if self._args is not args:
            self._args, self._full = args, _PENDING
            self._scopes = {}
            self._values = {}

    def args(self, args: object) -> Any:
        """``args`` as expressions read them (converted once per call, however many rules read them); ``{}``
        when they cannot be read (None, or no mapping)."""
        self._seen(args)
        if self._full is _PENDING:
            self._full = bindable(arguments(args))
        return self._full

    def scope(self, expression: Expression, args: object) -> Scope:
        """A scope holding what ``expression`` reads of ``args``, the state and the clock (bound once per call:
        binding a value costs about a microsecond per field, evaluating in a bound scope well under one)."""
        if "args" in expression.names:
            self._seen(args)
        reads = _reads(expression)
        scope = self._scopes.get(reads)
        if scope is None:
            scope = self._scopes[reads] = Scope(self.values(reads, args))
        return scope

    def values(self, reads: Reads, args: object) -> dict[str, Any]:
        """The values of ``args``, ``now`` and ``state`` an expression reads (``reads``: see ``_reads``); the same
        dictionary for the same ``reads`` and ``args`` (do not change it)."""
        names, of_args, of_state = reads
        if "args" in names:
            self._seen(args)
        found = self._values.get(reads)
        if found is not None:
            return found
        out: dict[str, Any] = {}
        if "args" in names:
            part = None if of_args is None or self._full is not _PENDING else bindable_fields(args, of_args)
            out["args"] = _part(self.args(args), of_args) if part is None else part
        if "now" in names:
            out["now"] = self.now
        if "state" in names:
            out["state"] = self._state_part(of_state)
        self._values[reads] = out
        return out

    def _state_part(self, fields: tuple[str, ...] | None) -> Any:
        if self._state is None and fields is not None:
            part = bindable_fields(self.raw_state, fields)  # a state holds the messages: convert what is read
            if part is not None:
                return part
        return _part(self.state, fields)

    @property
    def state(self) -> Any:
        if self._state is None:
            value = bindable(self.raw_state) if isinstance(self.raw_state, Mapping) else None
            self._state = value if isinstance(value, dict) else {}
        return self._state


Reads = tuple[frozenset[str], tuple[str, ...] | None, tuple[str, ...] | None]
"""Which of ``args``, ``now`` and ``state`` an expression reads, and the only fields it selects of ``args`` and of
``state`` (None: it may read the whole value)."""

_READS: dict[str, Reads] = {}
_STRING = re.compile(r'"[^"\n]*"|\'[^\'\n]*\'')


def _reads(expression: Expression) -> Reads:
    """What ``expression`` reads of the call's values (worked out once per text)."""
    found = _READS.get(expression.text)
    if found is None:
        names = expression.names & _CALL_NAMES
        found = (names, _fields(expression.text, "args") if "args" in names else None,
                 _fields(expression.text, "state") if "state" in names else None)
        if len(_READS) >= 4096:
            _READS.clear()
        _READS[expression.text] = found
    return found


def _fields(text: str, name: str) -> tuple[str, ...] | None:
    """The fields ``text`` selects of the variable ``name`` when every use of it is ``name.field`` (then binding
    only those fields is the same to the expression); None when it may use the variable otherwise.

    Example:
        >>> _fields('args.amount <= 500 && args.currency == "args"', "args")
        ('amount', 'currency')
        >>> _fields("size(args) > 1", "args") is None, _fields("args.all(k, k != 'x')", "args") is None
        (True, True)
    """
    if "\\" in text or "'''" in text or '"""' in text:
        return None  # escapes and long strings: not worth reading here
    code = _STRING.sub('""', text)
    fields: list[str] = []
    for match in re.finditer(rf"(?<!\w){name}(?!\w)", code):
        selected = _SELECT.match(code, match.end())
        if selected is None or code[match.start() - 1:match.start()] == ".":  # ``.args``: the variable, or a field
            return None
        if selected.group(1) not in fields:
            fields.append(selected.group(1))
    return tuple(fields)


_SELECT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)(?![\w(])(?!\s*\()")


def _part(value: Any, fields: tuple[str, ...] | None) -> Any:
    return value if fields is None else {f: value[f] for f in fields if f in value}


def _vars(expression: Expression, bindings: Bindings, args: object, result: CallResult | None) -> dict[str, Any]:
    out = bindings.values(_reads(expression), args)
    names = expression.names
    if result is not None and ("result" in names or "call" in names):
        out = dict(out)
        if "result" in names:
            out["result"] = bindable(result.content)
        if "call" in names:
            out["call"] = bindable(result.args) if isinstance(result.args, Mapping) else {}
    return out


_CALL_NAMES = frozenset({"args", "now", "state"})  # what an expression reads besides an earlier call
_RESULT_NAMES = frozenset({"result", "call"})  # what it reads of an earlier call


def _scope(result: CallResult) -> Scope:
    """The result's ``result`` and ``call`` bound once (kept on the result: every later decision reuses them)."""
    scope: Scope | None = result.scope
    if scope is None:
        scope = Scope({"result": bindable(result.content),
                       "call": bindable(result.args) if isinstance(result.args, Mapping) else {}})
        object.__setattr__(result, "scope", scope)
    return scope


def _holds(expression: Expression, bindings: Bindings, args: object, result: CallResult | None) -> bool | str:
    """True or False, or why it could not be evaluated."""
    if result is not None and expression.names <= _RESULT_NAMES:
        return _held(expression, result)
    try:
        if result is None:
            return evaluate_bool(expression, {}, bindings.scope(expression, args))
        return evaluate_bool(expression, bindings.values(_reads(expression), args), _scope(result))
    except ExpressionError as exc:
        return str(exc)


def _held(expression: Expression, result: CallResult) -> bool | str:
    """``_holds`` for an expression reading only the earlier call: a pure function of that call's result and
    arguments, so worked out once per result and kept on it (every later decision reads it)."""
    held: dict[str, bool | str] | None = result.held
    if held is None:
        held = {}
        object.__setattr__(result, "held", held)
    found = held.get(expression.text)
    if found is None:
        try:
            found = evaluate_bool(expression, {}, _scope(result))
        except ExpressionError as exc:
            found = str(exc)
        if len(held) < 256:
            held[expression.text] = found
    return found


def _pairs_match(pairs: Sequence[tuple[str, str]], args: Mapping[str, Any] | None,
                 earlier: Mapping[str, Any] | None) -> bool:
    """``same_args`` of a fact: unreadable arguments (None, no mapping) are ``{}``, so they lack every name."""
    if not pairs:
        return True
    args, earlier = arguments(args), arguments(earlier)
    for ours, theirs in pairs:
        if ours not in args or theirs not in earlier:
            return False
        mine, theirs_value = args[ours], earlier[theirs]
        if type(mine) is type(theirs_value) and type(mine) in _PLAIN:
            if mine != theirs_value:
                return False
        elif not same_arguments(["v"], {"v": mine}, {"v": theirs_value}):
            return False
    return True


_PLAIN = frozenset({str, int, bool})  # equal as JSON values iff equal in Python


_EXPRESSIONS: dict[str, Expression] = {}  # a rule's ``where`` -> its compiled form (a lookup without a lock)


@overload
def _expression(entry: CheckPrecondition) -> Expression: ...
@overload
def _expression(entry: FactPrecondition) -> Expression | None: ...
def _expression(entry: FactPrecondition | CheckPrecondition) -> Expression | None:
    """``entry.expression``: compiled (or refused, raising) the first time its text is seen, then looked up."""
    text = entry.where
    found = None if text is None else _EXPRESSIONS.get(text)
    if found is not None or text is None:
        return found
    expression = entry.expression
    if expression is not None:
        if len(_EXPRESSIONS) >= 4096:
            _EXPRESSIONS.clear()
        _EXPRESSIONS[text] = expression
    return expression


_BARE: dict[str, str | None] = {}  # a rule's tool reference -> its bare name (a regex match saved per decision)


def _bare(tool: str) -> str | None:
    try:
        return _BARE[tool]
    except KeyError:
        if len(_BARE) >= 4096:
            _BARE.clear()
        name = _BARE[tool] = bare_identifier(tool)
        return name


def _voided(entry: FactPrecondition, index: int, results: Sequence[CallResult]) -> bool:
    """A later successful call of a ``voided_by`` tool cancels the call at ``index`` (same ``same_args`` values)."""
    earlier = results[index]
    voiders = {bare_identifier(t) for t in entry.voided_by}
    for later in results[index + 1:]:
        if later.failed or later.name not in voiders:
            continue
        mine, theirs = arguments(earlier.args), arguments(later.args)
        if all(mine.get(name) == theirs.get(name) for _, name in entry.same_args
               if name in mine and name in theirs):
            return True
    return False


def fact_outcome(entry: FactPrecondition, args: Mapping[str, Any] | None, history: History,
                 bindings: Bindings) -> Outcome:
    """Whether an earlier successful call of the fact's tool satisfies it.

    The candidates are its successful calls (in the window, with the ``same_args`` values, not voided; only the
    newest with ``latest``), read newest first, one at a time: a fact met by its newest call reads no older one.
    """
    results = history.results
    latest, same, this_turn = entry.latest, entry.same_args, entry.within == "user_turn"
    expression: Expression | None = None
    seen = False
    why: str | None = None
    for index in reversed(history.positions(_bare(entry.tool))):
        result = results[index]
        if result.failed:
            continue
        if this_turn and result.user_turn < history.user_turn:
            if latest:
                break
            continue
        if same and not _pairs_match(same, args, result.args):
            continue
        if entry.voided_by and _voided(entry, index, results):
            if latest:
                break
            continue
        if not seen:
            seen = True
            expression = _expression(entry)
            if expression is None:
                return MET
        held = _holds(expression, bindings, args, result)  # type: ignore[arg-type]  # set on the first one
        if held is True:
            return MET
        if held is not False and why is None:
            why = held
        if latest:  # only the most recent call that matches
            break
    if not seen:
        return Outcome("missing", fact_phrase(entry))
    if why is not None:
        return Outcome("error", f"`{entry.where}` could not be evaluated ({why})")
    return Outcome("refused", entry.message or f"`{entry.tool}` shows the action is not allowed "
                                                f"(`{entry.where}` is false)")


def check_outcome(entry: CheckPrecondition, args: Mapping[str, Any] | None, bindings: Bindings) -> Outcome:
    """Whether the check's expression holds over the action's arguments, the state and the clock."""
    held = _holds(_expression(entry), bindings, args, None)
    if held is True:
        return MET
    if held is False:
        return Outcome("refused", entry.message or f"`{entry.where}` is false for this call")
    return Outcome("error", f"`{entry.where}` could not be evaluated ({held})")


def any_outcome(entry: AnyPrecondition, args: Mapping[str, Any] | None, history: History, bindings: Bindings,
                *, count_failed: bool = False, action: str | None = None,
                known: tuple[tuple[str, ...], tuple[str | None, ...]] | None = None) -> Outcome:
    """One alternative holds; else missing when a further call could still meet one, else refused or error.

    A missing call is never the ``action`` itself (a fact over earlier runs of the action cannot be met by
    calling it first): such an alternative counts as refused, with its message. When a further call can
    still meet the group, the block names it and says why the alternatives already tried do not hold.
    ``known``: the group's names and its alternatives' problems, when the caller keeps them (a compiled rule).

    Example:
        >>> from datetime import datetime, timezone
        >>> group = AnyPrecondition(alternatives=(
        ...     FactPrecondition(tool="find_by_email", where="result == args.user_id", message="Not this user."),
        ...     FactPrecondition(tool="find_by_name_zip", where="result == args.user_id", message="Not this user.")))
        >>> history = History((CallResult("find_by_email", {}, False, 1, '"u2"'),), 1)
        >>> any_outcome(group, {"user_id": "u1"}, history, Bindings({}, datetime.now(timezone.utc))).detail
        'find_by_name_zip (the others do not hold: Not this user.)'
    """
    names, problems = known or (entry.names, tuple(a.blocking() for a in entry.alternatives))
    called = history.called(count_failed=count_failed)
    for name in names:
        if name in called:
            return MET
    missing: list[str] = list(names)
    refused: list[str] = []
    errors: list[str] = []
    for alternative, problem in zip(entry.alternatives, problems, strict=True):
        if problem is not None:
            errors.append(f"a misconfigured alternative ({problem})")
            continue
        if isinstance(alternative, FactPrecondition):
            outcome = fact_outcome(alternative, args, history, bindings)
            if outcome.status == "missing" and action is not None and _bare(alternative.tool) == action:
                outcome = Outcome("refused", alternative.message or f"no earlier `{action}` call meets it")
        else:
            outcome = check_outcome(alternative, args, bindings)
        status = outcome.status
        if status == "met":
            return MET
        (missing if status == "missing" else refused if status == "refused" else errors).append(outcome.detail)
    if missing:
        detail = " or ".join(dict.fromkeys(missing))
        tried = [*dict.fromkeys(refused), *dict.fromkeys(errors)]
        return Outcome("missing", f"{detail} (the others do not hold: {' '.join(_sentences(tried))})" if tried
                       else detail)
    if errors:
        return Outcome("error", "; ".join(dict.fromkeys(errors)))
    return Outcome("refused", " Or: ".join(dict.fromkeys(refused)))


def _sentences(texts: Sequence[str]) -> list[str]:
    return [t if t.rstrip()[-1:] in ".!?" else t + "." for t in texts]


def limit_outcome(entry: LimitPrecondition, tool: str, args: Mapping[str, Any] | None, history: History,
                  bindings: Bindings, in_flight: Sequence[Mapping[str, Any] | None] = ()) -> Outcome:
    """The conversation's count (or sum) of the action's successful runs, with the calls already allowed in
    this batch (``in_flight``), stays within the limit with this call.

    A ``namespace`` or ``tenant`` limit is counted in the store (``TurnMemory`` reserves a slot); decided
    here (replay, ``explain``) it counts the conversation only.
    """
    results = history.results
    runs: list[Mapping[str, Any] | None] = [results[i].args for i in history.positions(tool) if not results[i].failed]
    runs.extend(in_flight)
    message = entry.message
    if entry.max_calls is not None and len(runs) + 1 > entry.max_calls:
        return Outcome("refused", message or f"`{tool}` may run at most {entry.max_calls} time(s) per "
                                             f"{entry.per}; it ran {len(runs)} time(s)")
    expression = entry.expression
    if expression is None or entry.max_sum is None:
        return MET
    total = 0.0
    for run in [*runs, args]:
        try:
            value = evaluate(expression, _vars(expression, bindings, run, None))
        except ExpressionError as exc:
            return Outcome("error", f"`{entry.sum}` could not be evaluated ({exc})")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return Outcome("error", f"`{entry.sum}` could not be evaluated (it gave {type(value).__name__}, "
                                    "not a number)")
        total += float(value)
    if total > entry.max_sum:
        return Outcome("refused", message or f"the sum of `{entry.sum}` over `{tool}`'s runs would be {total:g}, "
                                             f"over {entry.max_sum:g} per {entry.per}")
    return MET


def limit_amount(entry: LimitPrecondition, args: Mapping[str, Any] | None, bindings: Bindings) -> float | str:
    """What one call adds to a ``max_sum`` limit (0 for a count), or why ``sum`` could not be evaluated."""
    expression = entry.expression
    if expression is None:
        return 0.0
    try:
        value = evaluate(expression, _vars(expression, bindings, args, None))
    except ExpressionError as exc:
        return str(exc)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"it gave {type(value).__name__}, not a number"
    return float(value)


def fact_phrase(entry: FactPrecondition, *, quote: str = "") -> str:
    """How a fact is named when it asks for a call: ``get_order (same order_id)``."""
    q = quote
    phrase = f"{q}{entry.tool}{q}"
    if entry.same_args:
        phrase += " (same " + ", ".join(f"{q}{a}{q}" if a == b else f"{q}{a}{q} as its {q}{b}{q}"
                                        for a, b in entry.same_args) + ")"
    if entry.within == "user_turn":
        phrase += " (after the user's latest message)"
    return phrase
