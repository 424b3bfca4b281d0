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
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

from symfonic_graph.errors import ValidationError
from symfonic_graph.rules._messages import HistoryReader

__all__ = ["RuleProposal", "before_each_call", "mine_rules"]

MAX_EXAMPLES: Final = 5

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
    """

    action: str
    precondition: str
    support: int
    confidence: float
    failures_without: int | None
    examples: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the fields."""
        return {"action": self.action, "precondition": self.precondition, "support": self.support,
                "confidence": self.confidence, "failures_without": self.failures_without,
                "examples": list(self.examples)}


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


def _before_each_call(messages: Iterable[Any], reader: HistoryReader) -> dict[str, set[str]]:
    done: set[str] = set()
    seen = 0
    out: dict[str, set[str]] = {}
    for message in messages:
        for call in reader.feed(message):  # an AI message adds no result: ``done`` is what came before it
            earlier = out.get(call.name)
            if earlier is None:
                out[call.name] = set(done)
            else:
                earlier &= done
        results = reader.results
        if len(results) > seen:
            done.update(r.name for r in results[seen:])
            seen = len(results)
    return out


class _Counts:
    """Activations and unviolated pairs of one outcome bucket."""

    __slots__ = ("examples", "kept", "support")

    def __init__(self) -> None:
        self.support: Counter[str] = Counter()
        self.kept: Counter[tuple[str, str]] = Counter()
        self.examples: dict[tuple[str, str], list[str]] = {}

    def add(self, trace_id: str, before: dict[str, set[str]], guarded: frozenset[str] | None) -> None:
        for action, earlier in before.items():
            if guarded is not None and action not in guarded:
                continue
            self.support[action] += 1
            for tool in earlier:
                if tool == action:
                    continue
                pair = (tool, action)
                self.kept[pair] += 1
                ids = self.examples.setdefault(pair, [])
                if len(ids) < MAX_EXAMPLES:
                    ids.append(trace_id)


def _check(actions: Iterable[str] | None, min_support: object, min_confidence: object) -> frozenset[str] | None:
    if isinstance(min_support, bool) or not isinstance(min_support, int) or min_support < 1:
        raise ValidationError("min_support", "must be a positive integer")
    if isinstance(min_confidence, bool) or not isinstance(min_confidence, (int, float)) \
            or not 0 < min_confidence <= 1:
        raise ValidationError("min_confidence", "must be a number in (0, 1]")
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
) -> list[RuleProposal]:
    """Propose "call A before B" rules from ``traces`` (objects with ``id``, ``messages``, ``outcome``).

    Args:
        traces: read once, streaming (e.g. ``load_traces(path)``).
        actions: the tools that may be guarded; None = every tool.
        min_support: the fewest activating traces a rule needs.
        min_confidence: the least share of activating traces without a violation.

    Returns:
        The proposals, sorted by action then precondition; the same traces
        (in the same order) always give the same proposals.

    Raises:
        ValidationError: a parameter out of range.
    """
    guarded = _check(actions, min_support, min_confidence)
    buckets = {None: _Counts(), "success": _Counts(), "failure": _Counts()}
    any_outcome = False
    for trace in traces:
        outcome = trace.outcome
        bucket = buckets.get(outcome)
        if bucket is None:
            continue  # an outcome Trace never holds: not counted anywhere
        any_outcome = any_outcome or outcome is not None
        reader = HistoryReader()
        bucket.add(str(trace.id), _before_each_call(trace.messages, reader), guarded)
        if reader.unread:
            log.warning("mining: trace %r: %s", str(trace.id), reader.report())
    counts = buckets["success"] if any_outcome else buckets[None]
    failed = buckets["failure"]
    rules: dict[tuple[str, str], float] = {}
    for (tool, action), kept in counts.kept.items():
        support = counts.support[action]
        if support >= min_support and kept / support >= min_confidence:
            rules[tool, action] = kept / support
    pruned = {(a, c) for (a, b) in rules for (b2, c) in rules if b == b2 and (a, c) in rules}
    return [
        RuleProposal(action, tool, counts.support[action], confidence,
                     failed.support[action] - failed.kept[tool, action] if any_outcome else None,
                     tuple(counts.examples.get((tool, action), ())))
        for (tool, action), confidence in sorted(rules.items(), key=lambda item: (item[0][1], item[0][0]))
        if (tool, action) not in pruned
    ]
