"""A reference miner with SPEC §12's semantics, used by bench/compliance.py only while the library has none.

Once ``symfonic_graph.mining`` exists the benchmark imports its ``mine_rules``
instead, and this module can go. It reads messages through the gate's own
reader (``called_tools`` and ``terminal_tool_calls``), so a call counts once
its result appears, as in the gate.

Example:
    >>> from bench.compliance import BenchTrace
    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "login", "args": {}}]},
    ...         {"role": "tool", "tool_call_id": "1", "name": "login", "content": "ok"},
    ...         {"role": "assistant", "content": "", "tool_calls": [{"id": "2", "name": "buy", "args": {}}]}]
    >>> [(p.action, p.precondition, p.support) for p in mine_rules([BenchTrace("t", msgs, None)], min_support=1)]
    [('buy', 'login', 1)]
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from symfonic_graph._messages import called_tools, terminal_tool_calls


@dataclass(frozen=True)
class RuleProposal:
    """Call ``precondition`` before ``action``, with its evidence."""

    action: str
    precondition: str
    support: int
    confidence: float
    failures_without: int | None
    examples: tuple[str, ...]


def _before_each_call(messages: Sequence[Any]) -> dict[str, frozenset[str]]:
    """Per called tool: the tools whose results came before *every* call of it."""
    out: dict[str, frozenset[str]] = {}
    for k in range(len(messages)):
        calls = terminal_tool_calls(messages[: k + 1])
        if not calls:
            continue
        earlier = called_tools(messages[:k])
        for call in calls:
            out[call.name] = out[call.name] & earlier if call.name in out else earlier
    return out


def mine_rules(
    traces: Iterable[Any], *, actions: Iterable[str] | None = None, min_support: int = 5, min_confidence: float = 0.95
) -> list[RuleProposal]:
    """Propose "call A before B" from ``traces`` (objects with ``.id``, ``.messages``, ``.outcome``)."""
    guarded = None if actions is None else set(actions)
    rows = [(trace.id, trace.outcome, _before_each_call(trace.messages)) for trace in traces]
    any_outcome = any(outcome is not None for _, outcome, _ in rows)
    failed = [before for _, outcome, before in rows if outcome == "failure"]
    support: Counter[str] = Counter()
    kept: Counter[tuple[str, str]] = Counter()
    examples: defaultdict[tuple[str, str], list[str]] = defaultdict(list)
    for trace_id, outcome, before in rows:
        if any_outcome and outcome != "success":
            continue
        for action, pre in before.items():
            if guarded is not None and action not in guarded:
                continue
            support[action] += 1
            for tool in pre - {action}:
                kept[tool, action] += 1
                if len(examples[tool, action]) < 5:
                    examples[tool, action].append(trace_id)
    rules = {
        (a, b): kept[a, b] / support[b]
        for (a, b) in kept
        if support[b] >= min_support and kept[a, b] / support[b] >= min_confidence
    }
    pruned = {(a, c) for (a, b) in rules for (b2, c) in rules if b == b2 and (a, c) in rules}
    return [
        RuleProposal(b, a, support[b], confidence,
                     sum(1 for f in failed if b in f and a not in f[b]) if any_outcome else None,
                     tuple(examples[a, b]))
        for (a, b), confidence in sorted(rules.items(), key=lambda item: (item[0][1], item[0][0]))
        if (a, b) not in pruned
    ]
