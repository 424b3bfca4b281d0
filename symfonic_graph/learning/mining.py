"""Mine "call A before B" rules from recorded conversations.

The semantics, in the order they are applied:

* A trace *activates* B when B is called in it (its AI message asks for B).
  When any trace carries an outcome, only successful traces count for
  support and confidence.
* B is *violated* in a trace when some call of B has no earlier *result* of
  A, read as the gate reads a conversation: a call counts once its result
  appears, results the gate injected never count, and a call in the same AI
  message as B is not earlier. A failed result is still a result here (the
  tool was called); the gate decides separately whether failed calls count.
  A violation is never "not applicable": a trace that calls B and never A
  counts against A→B.
* support = activating traces; confidence = activating traces without a
  violation / support. A→B is kept when support >= ``min_support`` and
  confidence >= ``min_confidence``. A tool never precedes itself.
* ``actions`` limits the guarded tools B; any tool may be a precondition.
* Messages the gate cannot read count as nothing here too; each trace holding
  some is named in one WARNING.
* Pruning: A→C is dropped when A→B and B→C are both kept (the gate already
  enforces A before C through B).
* ``outcomes="all"`` counts every trace for support and confidence, failed
  ones too, so a rule that only failed conversations support is proposed.
* ``same_args``: a kept A→B names the arguments B and A share whose values
  were equal (as JSON values, as the gate compares them) for every call of B
  and some earlier result of A, in at least ``min_confidence`` of the traces
  supporting it: "call A with the same ``reservation_id`` before B".
* Near misses (``mine``): a pair under ``min_support`` or ``min_confidence``
  but within reach (support at least half of ``min_support``, confidence at
  most 0.1 under ``min_confidence``) is listed with its shortfall, never
  proposed; the 20 closest.

The miner reads each trace once and keeps counters per tool pair, so memory
depends on the number of distinct tools, not on the number of traces.

Example:
    >>> from symfonic_graph.learning.traces import Trace
    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "login", "args": {}}]},
    ...         {"role": "tool", "tool_call_id": "1", "name": "login", "content": "ok"},
    ...         {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "buy", "args": {}}]}]
    >>> [(p.action, p.precondition, p.support) for p in mine_rules([Trace("t", msgs)], min_support=1)]
    [('buy', 'login', 1)]
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from symfonic_graph.errors import ValidationError
from symfonic_graph.rules._messages import HistoryReader
from symfonic_graph.rules.preconditions import json_key

__all__ = ["MiningReport", "NearMiss", "RuleProposal", "before_each_call", "mine", "mine_rules"]

MAX_EXAMPLES: Final = 5
MAX_NEAR_MISSES: Final = 20
NEAR_SUPPORT: Final = 0.5
"""A near miss has at least this share of ``min_support``..."""
NEAR_CONFIDENCE: Final = 0.1
"""... and a confidence at most this far under ``min_confidence``."""
Outcomes = Literal["success", "all"]
_ARG_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # the names a same_args precondition takes

log = logging.getLogger("symfonic_graph.mining")  # the logger's name is a contract (docs/observability.md)


@dataclass(frozen=True, slots=True)
class RuleProposal:
    """Call ``precondition`` before ``action``, with its evidence.

    Attributes:
        action: the guarded tool B.
        precondition: the tool A that must come first.
        support: traces that call B (successful ones when outcomes exist).
        confidence: the share of them in which every call of B came after a result of A.
        failures_without: failed traces in which B ran without an earlier A (None without outcomes).
        examples: up to 5 ids of traces that support the rule, in reading order.
        same_args: arguments ``precondition`` was called with the same values as ``action`` (sorted);
            empty: a plain ordering rule.
    """

    action: str
    precondition: str
    support: int
    confidence: float
    failures_without: int | None
    examples: tuple[str, ...]
    same_args: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the fields."""
        return {"action": self.action, "precondition": self.precondition, "support": self.support,
                "confidence": self.confidence, "failures_without": self.failures_without,
                "examples": list(self.examples), "same_args": list(self.same_args)}


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A pair under the thresholds by a little: listed for the operator, never proposed.

    Attributes:
        action, precondition, support, confidence: as in ``RuleProposal``.
        support_short: how many more supporting traces ``min_support`` asks for (0: enough).
        confidence_short: how far the confidence is under ``min_confidence`` (0.0: enough).
    """

    action: str
    precondition: str
    support: int
    confidence: float
    support_short: int
    confidence_short: float

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the fields."""
        return {"action": self.action, "precondition": self.precondition, "support": self.support,
                "confidence": self.confidence, "support_short": self.support_short,
                "confidence_short": self.confidence_short}


@dataclass(frozen=True, slots=True)
class MiningReport:
    """What ``mine`` found: the proposals, the near misses and how many traces counted."""

    proposals: list[RuleProposal] = field(default_factory=list)
    near_misses: list[NearMiss] = field(default_factory=list)
    traces: int = 0
    """Traces read."""
    counted: int = 0
    """Traces that counted for support and confidence (``outcomes``)."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"traces": self.traces, "counted": self.counted,
                "proposals": [p.to_dict() for p in self.proposals],
                "near_misses": [n.to_dict() for n in self.near_misses]}


def before_each_call(messages: Iterable[Any]) -> dict[str, set[str]]:
    """Per called tool: the tools whose results came before *every* call of it.

    Example:
        >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "a"}]},
        ...         {"role": "tool", "tool_call_id": "1", "content": "ok"},
        ...         {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "b"},
        ...                                                              {"id": "3", "name": "a"}]}]
        >>> {k: sorted(v) for k, v in sorted(before_each_call(msgs).items())}
        {'a': [], 'b': ['a']}
    """
    return _before_each_call(messages, HistoryReader())


def _before_each_call(
    messages: Iterable[Any], reader: HistoryReader, guarded: frozenset[str] | None = None,
    same: dict[str, dict[str, set[str]]] | None = None,
) -> dict[str, set[str]]:
    """Per called tool, the tools done before every call of it; with ``same``, fill it in the same pass:
    per guarded action, per earlier tool, the arguments equal on every call of the action."""
    done: set[str] = set()
    values: dict[tuple[str, str], set[str]] = {}  # (argument, key of a value) -> tools whose results had it
    seen = 0
    out: dict[str, set[str]] = {}
    for message in messages:
        for call in reader.feed(message):  # an AI message adds no result: ``done`` is what came before it
            earlier = out.get(call.name)
            if earlier is None:
                out[call.name] = set(done)
            else:
                earlier &= done
            if same is not None and (guarded is None or call.name in guarded):
                agreeing = _agreeing(call.args, values)
                previous = same.get(call.name)
                if previous is None:
                    same[call.name] = agreeing
                else:
                    for tool in list(previous):
                        previous[tool] &= agreeing.get(tool, set())
        results = reader.results
        if len(results) > seen:
            for result in results[seen:]:
                done.add(result.name)
                if same is not None and result.args:
                    _remember(values, result.name, result.args)
            seen = len(results)
    return out


def _value_key(value: object) -> str | None:
    """A value as the gate's ``same_arguments`` compares it (as JSON: 1.0 == 1, "1" != 1); None: never equal.

    Scalars take a fast path (most arguments are ids); anything else is compared as canonical JSON.
    """
    if isinstance(value, str):
        return "s" + value
    if isinstance(value, bool):
        return "b1" if value else "b0"
    if isinstance(value, int):
        return "n" + str(value)
    if value is None:
        return None  # an absent optional argument on both sides is no evidence of the same object
    if isinstance(value, float):
        if value.is_integer():
            return "n" + str(int(value))
        return "f" + repr(value) if math.isfinite(value) else None

    key = json_key(value)
    return None if key is None else "j" + key


def _remember(values: dict[tuple[str, str], set[str]], tool: str, args: Mapping[str, Any]) -> None:
    for name, value in args.items():
        if isinstance(name, str) and _ARG_NAME.match(name):
            key = _value_key(value)
            if key is not None:
                tools = values.get((name, key))
                if tools is None:
                    values[name, key] = {tool}
                else:
                    tools.add(tool)


def _agreeing(args: Mapping[str, Any] | None, values: dict[tuple[str, str], set[str]]) -> dict[str, set[str]]:
    """Per earlier tool, the arguments of this call one of its results had the same value of."""
    out: dict[str, set[str]] = {}
    if not args or not values:
        return out
    for name, value in args.items():
        key = _value_key(value) if isinstance(name, str) else None
        tools = values.get((name, key)) if key is not None else None
        if tools:
            for tool in tools:
                names = out.get(tool)
                if names is None:
                    out[tool] = {name}
                else:
                    names.add(name)
    return out


class _Counts:
    """Activations, unviolated pairs and their equal arguments, of one outcome bucket."""

    __slots__ = ("examples", "kept", "same", "support", "traces")

    def __init__(self) -> None:
        self.traces = 0
        self.support: Counter[str] = Counter()
        self.kept: Counter[tuple[str, str]] = Counter()
        self.same: dict[tuple[str, str], Counter[str]] = {}
        self.examples: dict[tuple[str, str], list[str]] = {}

    def add(self, trace_id: str, before: dict[str, set[str]], same: dict[str, dict[str, set[str]]],
            guarded: frozenset[str] | None) -> None:
        self.traces += 1
        for action, earlier in before.items():
            if guarded is not None and action not in guarded:
                continue
            self.support[action] += 1
            agreeing = same.get(action, {})
            for tool in earlier:
                if tool == action:
                    continue
                pair = (tool, action)
                self.kept[pair] += 1
                names = agreeing.get(tool)
                if names:
                    equal = self.same.get(pair)
                    if equal is None:
                        self.same[pair] = equal = Counter()
                    for name in names:
                        equal[name] += 1
                ids = self.examples.setdefault(pair, [])
                if len(ids) < MAX_EXAMPLES:
                    ids.append(trace_id)


def _check(
    actions: Iterable[str] | None, min_support: object, min_confidence: object, outcomes: object = "success"
) -> frozenset[str] | None:
    if isinstance(min_support, bool) or not isinstance(min_support, int) or min_support < 1:
        raise ValidationError("min_support", "must be a positive integer")
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float)) \
            or not 0 < min_confidence <= 1:
        raise ValidationError("min_confidence", "must be a number in (0, 1]")
    if outcomes not in ("success", "all"):
        raise ValidationError("outcomes", f'must be "success" or "all", got {outcomes!r}')
    if actions is None:
        return None
    if isinstance(actions, str):
        raise ValidationError("actions", "must be a list of tool names, not one string")
    names = frozenset(actions)
    if not all(isinstance(name, str) and name for name in names):
        raise ValidationError("actions", "must be a list of non-empty tool names")
    return names


def mine_rules(
    traces: Iterable[Any],
    *,
    actions: Iterable[str] | None = None,
    min_support: int = 5,
    min_confidence: float = 0.95,
    outcomes: Outcomes = "success",
) -> list[RuleProposal]:
    """Propose "call A before B" rules from ``traces`` (objects with ``id``, ``messages``, ``outcome``).

    Args:
        traces: read once, streaming (e.g. ``load_traces(path)``).
        actions: the tools that may be guarded; None = every tool.
        min_support: the fewest activating traces a rule needs.
        min_confidence: the least share of activating traces without a violation.
        outcomes: ``"success"``: once any trace carries an outcome, only successful ones count;
            ``"all"``: every trace counts, failed ones too.

    Returns:
        The proposals, sorted by action then precondition; the same traces
        (in the same order) always give the same proposals.

    Raises:
        ValidationError: a parameter out of range.
    """
    return mine(traces, actions=actions, min_support=min_support, min_confidence=min_confidence,
                outcomes=outcomes).proposals


def mine(
    traces: Iterable[Any],
    *,
    actions: Iterable[str] | None = None,
    min_support: int = 5,
    min_confidence: float = 0.95,
    outcomes: Outcomes = "success",
) -> MiningReport:
    """``mine_rules``, with the near misses and the number of traces read and counted.

    Example:
        >>> from symfonic_graph.learning.traces import Trace
        >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "a", "args": {}}]},
        ...         {"role": "tool", "tool_call_id": "1", "content": "ok"},
        ...         {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "b", "args": {}}]}]
        >>> report = mine([Trace(f"t{i}", msgs) for i in range(4)], min_support=5)
        >>> report.proposals, [(n.precondition, n.action, n.support_short) for n in report.near_misses]
        ([], [('a', 'b', 1)])
    """
    guarded = _check(actions, min_support, min_confidence, outcomes)
    buckets = {None: _Counts(), "success": _Counts(), "failure": _Counts()}
    every = _Counts() if outcomes == "all" else None
    any_outcome = False
    read = 0
    for trace in traces:
        read += 1
        outcome = trace.outcome
        bucket = buckets.get(outcome)
        if bucket is None:
            continue  # an outcome Trace never holds: not counted anywhere
        any_outcome = any_outcome or outcome is not None
        reader = HistoryReader()
        same: dict[str, dict[str, set[str]]] = {}
        before = _before_each_call(trace.messages, reader, guarded, same)
        trace_id = str(trace.id)
        bucket.add(trace_id, before, same, guarded)
        if every is not None:
            every.add(trace_id, before, same, guarded)
        if reader.unread:
            log.warning("mining: trace %r: %s", trace_id, reader.report())
    counts = every if every is not None else buckets["success"] if any_outcome else buckets[None]
    failed = buckets["failure"]
    rules: dict[tuple[str, str], float] = {}
    near: list[NearMiss] = []
    for (tool, action), kept in counts.kept.items():
        support = counts.support[action]
        confidence = kept / support
        if support >= min_support and confidence >= min_confidence:
            rules[tool, action] = confidence
        elif support >= math.ceil(min_support * NEAR_SUPPORT) and confidence >= min_confidence - NEAR_CONFIDENCE:
            near.append(NearMiss(action, tool, support, confidence, max(0, min_support - support),
                                 round(max(0.0, min_confidence - confidence), 6)))
    pruned = {(a, c) for (a, b) in rules for (b2, c) in rules if b == b2 and (a, c) in rules}
    proposals = [
        RuleProposal(action, tool, counts.support[action], confidence,
                     failed.support[action] - failed.kept[tool, action] if any_outcome else None,
                     tuple(counts.examples.get((tool, action), ())),
                     _same_args(counts, (tool, action), min_confidence))
        for (tool, action), confidence in sorted(rules.items(), key=lambda item: (item[0][1], item[0][0]))
        if (tool, action) not in pruned
    ]
    near.sort(key=lambda n: (n.support_short / min_support + n.confidence_short, n.action, n.precondition))
    near = sorted(near[:MAX_NEAR_MISSES], key=lambda n: (n.action, n.precondition))
    return MiningReport(proposals, near, read, counts.traces)


def _same_args(counts: _Counts, pair: tuple[str, str], min_confidence: float) -> tuple[str, ...]:
    """The arguments equal in at least ``min_confidence`` of the traces supporting ``pair``."""
    kept = counts.kept[pair]
    equal = counts.same.get(pair, Counter())
    return tuple(sorted(name for name, n in equal.items() if n / kept >= min_confidence))
