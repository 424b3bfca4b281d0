"""Replay rules over recorded conversations before they block anyone.

``replay`` walks each trace and, at every AI message with tool calls, asks
the gate's own decision (``symfonic_graph.gate``) what it would have done
given the calls made so far. Shadow rules count like enforced ones: the
question is what a rule *would* block once enforced.

Per rule, ``checked`` counts every call of its action tool seen, whether or
not its state predicates let it apply to the replay state (a rule dropped by
its predicates checks the call and never blocks it); ``blocked`` counts the
calls it was the gate's first failing rule for. ``blocked_in_success`` and
``blocked_in_failure`` split ``blocked`` (calls, not conversations) by the
trace's outcome, and are None when no trace carries one.

Messages the gate cannot read (a ``tool_call_id`` that is no string, a result
answering no pending call or several, arguments nested too deep) are read as
the gate reads them: as nothing. Each trace holding some is named in one
WARNING, with the first few of them.

Example:
    >>> from types import SimpleNamespace
    >>> from symfonic_graph.learning.traces import Trace
    >>> skill = SimpleNamespace(id="s1", metadata={"label": "Deploy", "action_tool": "deploy",
    ...                                            "precondition": ["run_tests"]})
    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "deploy", "args": {}}]}]
    >>> [(r.action, r.checked, r.blocked, r.trace_ids) for r in replay([Trace("t1", msgs)], [skill]).rules]
    [('deploy', 1, 1, ('t1',))]
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from symfonic_graph.rules._messages import HistoryReader
from symfonic_graph.rules.gate import GateDecision, decide_call
from symfonic_graph.rules.ruleset import Rule, rules_of

__all__ = ["ReplayReport", "RuleReplay", "replay"]

MAX_TRACE_IDS: Final = 10

log = logging.getLogger("symfonic_graph.replay")  # the logger's name is a contract (docs/observability.md)


@dataclass(frozen=True, slots=True)
class RuleReplay:
    """What one rule would have done over the replayed traces.

    Attributes:
        skill_id: the skill's id.
        label: the skill's label.
        action: the tool it guards.
        enforcement: ``"shadow"`` or ``"enforce"`` (how the rule runs today).
        checked: calls of ``action`` seen.
        blocked: calls it would have blocked (the gate's first failing rule for the call).
        trace_ids: up to 10 ids of traces where it would have blocked, in reading order.
        blocked_in_success: blocked calls in successful traces (None without outcomes).
        blocked_in_failure: blocked calls in failed traces (None without outcomes).
    """

    skill_id: str | None
    label: str | None
    action: str
    enforcement: str
    checked: int
    blocked: int
    trace_ids: tuple[str, ...]
    blocked_in_success: int | None
    blocked_in_failure: int | None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the fields."""
        return {"skill_id": self.skill_id, "label": self.label, "action": self.action,
                "enforcement": self.enforcement, "checked": self.checked, "blocked": self.blocked,
                "trace_ids": list(self.trace_ids), "blocked_in_success": self.blocked_in_success,
                "blocked_in_failure": self.blocked_in_failure}


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The replay of every rule: ``traces`` read, one ``RuleReplay`` per rule with an action tool."""

    traces: int
    rules: list[RuleReplay] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"traces": self.traces, "rules": [r.to_dict() for r in self.rules]}


class _Tally:
    __slots__ = ("blocked", "checked", "failure", "success", "trace_ids")

    def __init__(self) -> None:
        self.checked = self.blocked = self.success = self.failure = 0
        self.trace_ids: list[str] = []


def _blocking_rule(candidates: tuple[Rule, ...], decision: GateDecision) -> Rule:
    """The rule behind ``decision.blocking``: the gate checks the candidates its state filter keeps, in order."""
    dropped = {id(d.rule) for d in decision.dropped}
    kept = [rule for rule in candidates if id(rule) not in dropped]
    index = next(i for i, check in enumerate(decision.matched) if check is decision.blocking)
    return kept[index]


def replay(
    traces: Iterable[Any], skills: Iterable[Any] | None, *, state: object = None, count_failed_calls: bool = False
) -> ReplayReport:
    """Replay ``skills`` over ``traces`` with the gate's own decision.

    Args:
        traces: ``Trace`` objects (anything with ``id``, ``messages``, ``outcome``), read once, streaming.
        skills: the rules, in catalog order (skills, or a ``RuleSet``).
        state: the state the rules' state predicates see (default: an empty state, as a turn without one).
        count_failed_calls: count a failed earlier result as a call, as the gate option of that name.

    Returns:
        A ``ReplayReport``; memory does not grow with the number of traces.
    """
    ruleset = rules_of(skills)
    state = state if state is not None else {}
    guarded: list[Rule] = [rule for rule in ruleset.rules if rule.action_tool is not None]
    tallies: dict[int, _Tally] = {id(rule): _Tally() for rule in guarded}
    count = 0
    any_outcome = False
    for trace in traces:
        count += 1
        outcome = trace.outcome
        any_outcome = any_outcome or outcome is not None
        reader = HistoryReader()
        for message in trace.messages:
            calls = reader.feed(message)  # an AI message adds no call made: the history is the one before it
            if calls:
                history = reader.history()
                for call in calls:
                    candidates = ruleset.for_tool(call.name)
                    if not candidates:
                        continue
                    for rule in candidates:
                        tallies[id(rule)].checked += 1
                    decision = decide_call(ruleset, call, history, state, filtered=True,
                                       count_failed=count_failed_calls, enforce_shadow=True)
                    if decision.blocking is None:
                        continue
                    tally = tallies[id(_blocking_rule(candidates, decision))]
                    tally.blocked += 1
                    if outcome == "success":
                        tally.success += 1
                    elif outcome == "failure":
                        tally.failure += 1
                    if len(tally.trace_ids) < MAX_TRACE_IDS and trace.id not in tally.trace_ids:
                        tally.trace_ids.append(str(trace.id))
        if reader.unread:
            log.warning("replay: trace %r: %s", str(trace.id), reader.report())
    return ReplayReport(count, [
        RuleReplay(rule.skill_id, rule.label, rule.action_tool or "", "shadow" if rule.shadow else "enforce",
                   t.checked, t.blocked, tuple(t.trace_ids),
                   t.success if any_outcome else None, t.failure if any_outcome else None)
        for rule in guarded for t in (tallies[id(rule)],)
    ])
