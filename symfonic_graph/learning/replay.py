"""Replay rules over recorded conversations before they block anyone.

``replay`` walks each trace and, at every AI message with tool calls, asks
the gate's own decision (``symfonic_graph.gate``) what it would have done
given the calls made so far. Shadow rules count like enforced ones: the
question is what a rule *would* block once enforced.

Per rule, ``checked`` counts every call of its action tool seen, whether or
not its state predicates let it apply to the replay state (a rule dropped by
its predicates checks the call and never blocks it); ``blocked`` counts the
calls it was the gate's first failing rule for, and ``blocked_alone`` the
calls it would have blocked on its own, whatever other rule failed first (so
a mined rule and a hand-written one over the same traces compare call for
call). ``blocked_in_success`` and
``blocked_in_failure`` split ``blocked`` (calls, not conversations) by the
trace's outcome, and are None when no trace carries one.

Messages the gate cannot read (a ``tool_call_id`` that is no string, a result
answering no pending call or several, arguments nested too deep) are read as
the gate reads them: as nothing. Each trace holding some is named in one
WARNING, with the first few of them.

With ``decisions=True`` the report also lists every call some rule blocked
or would have blocked (``ReplayDecision``): the trace, the call id, the
call's position among the trace's tool calls (recorded conversations reuse
call ids), the rules that failed, ``enforce`` when an enforced rule blocked
it (else ``shadow``: it would have been blocked once enforced) and the first
sentence of the gate's error text.

Example:
    >>> from types import SimpleNamespace
    >>> from symfonic_graph.learning.traces import Trace
    >>> skill = SimpleNamespace(id="s1", metadata={"label": "Deploy", "action_tool": "deploy",
    ...                                            "precondition": ["run_tests"]})
    >>> msgs = [{"role": "assistant", "content": "", "tool_calls": [{"id": "1", "name": "deploy", "args": {}}]}]
    >>> [(r.action, r.checked, r.blocked, r.trace_ids) for r in replay([Trace("t1", msgs)], [skill]).rules]
    [('deploy', 1, 1, ('t1',))]
    >>> [(d.index, d.tool, d.mode, d.reason) for d in replay([Trace("t1", msgs)], [skill], decisions=True).decisions]
    [(0, 'deploy', 'enforce', 'Missing precondition: call run_tests before deploy (skill: Deploy).')]
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Final, Literal

from symfonic_graph.errors import ValidationError
from symfonic_graph.rules._messages import GATE_CONTENT_MARKER, HistoryReader
from symfonic_graph.rules.gate import GateDecision, decide_call
from symfonic_graph.rules.policy import Bindings, utc_now
from symfonic_graph.rules.ruleset import Rule, SkillCheck, rules_of

__all__ = ["ReplayDecision", "ReplayReport", "RuleReplay", "first_sentence", "replay"]

MAX_TRACE_IDS: Final = 10

log = logging.getLogger("symfonic_graph.replay")  # the logger's name is a contract (docs/observability.md)

_SENTENCE: Final = re.compile(r"^(.*?[.!?])(?=\s|$)", re.DOTALL)


def first_sentence(text: str) -> str:
    """The first sentence of a gate error: up to the first ``.``, ``!`` or ``?`` followed by a space or the end.

    Example:
        >>> first_sentence("Missing precondition: call a before b.c (skill: v1.2). `b.c` was not executed.")
        'Missing precondition: call a before b.c (skill: v1.2).'
    """
    text = text.replace(GATE_CONTENT_MARKER, "").strip()
    found = _SENTENCE.match(text)
    return found.group(1) if found else text


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
        blocked_alone: calls it would have blocked on its own (failing, first or not).
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
    blocked_alone: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the fields."""
        return {"skill_id": self.skill_id, "label": self.label, "action": self.action,
                "enforcement": self.enforcement, "checked": self.checked, "blocked": self.blocked,
                "blocked_alone": self.blocked_alone, "trace_ids": list(self.trace_ids),
                "blocked_in_success": self.blocked_in_success, "blocked_in_failure": self.blocked_in_failure}


@dataclass(frozen=True, slots=True)
class ReplayDecision:
    """One call some rule blocked (``mode="enforce"``) or would have blocked once enforced (``"shadow"``).

    Attributes:
        trace: the trace's id.
        call_id: the call's id (None when it had none); recorded conversations reuse ids.
        index: the call's position among the trace's tool calls, from 0.
        tool: the called tool.
        rules: the ids of every rule that fails for the call, in catalog order.
        mode: ``"enforce"`` when an enforced rule fails (the gate blocks it), else ``"shadow"``.
        reason: the first sentence of the gate's error text (of the first enforced failing rule, else the first).
    """

    trace: str
    call_id: str | None
    index: int
    tool: str
    rules: tuple[str | None, ...]
    mode: Literal["enforce", "shadow"]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping of the fields."""
        return {"trace": self.trace, "call_id": self.call_id, "index": self.index, "tool": self.tool,
                "rules": list(self.rules), "mode": self.mode, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """The replay of every rule: ``traces`` read, one ``RuleReplay`` per rule with an action tool,
    and (``replay(..., decisions=True)``) every call blocked or would-be blocked, in reading order."""

    traces: int
    rules: list[RuleReplay] = field(default_factory=list)
    decisions: list[ReplayDecision] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"traces": self.traces, "rules": [r.to_dict() for r in self.rules],
                "decisions": [d.to_dict() for d in self.decisions]}


class _Tally:
    __slots__ = ("alone", "blocked", "checked", "failure", "success", "trace_ids")

    def __init__(self) -> None:
        self.checked = self.blocked = self.alone = self.success = self.failure = 0
        self.trace_ids: list[str] = []


def _checks(candidates: tuple[Rule, ...], decision: GateDecision) -> list[tuple[Rule, SkillCheck]]:
    """Each matched check with its rule: the gate checks the candidates its state filter keeps, in order."""
    dropped = {id(d.rule) for d in decision.dropped}
    kept = [rule for rule in candidates if id(rule) not in dropped]
    return list(zip(kept, decision.matched, strict=True))


def _bindings(state: object, now: datetime | None) -> Bindings:
    """What every decision of the replay reads besides the call: the state, and one clock for the whole replay."""
    if now is not None and not isinstance(now, datetime):
        raise ValidationError("now", f"must be a datetime, got {type(now).__name__}")
    return Bindings(state, utc_now() if now is None else now)  # a zone-less datetime is UTC, as in the gate


def _decision(
    trace_id: str, index: int, decision: GateDecision, failing: list[tuple[Rule, SkillCheck]]
) -> ReplayDecision:
    enforced = [check for rule, check in failing if not rule.shadow]
    check = enforced[0] if enforced else failing[0][1]
    content = replace(decision, verdict="blocked", blocking=check).content() or ""
    return ReplayDecision(trace_id, decision.call_id, index, decision.tool_name,
                          tuple(rule.skill_id for rule, _ in failing), "enforce" if enforced else "shadow",
                          first_sentence(content))


def replay(
    traces: Iterable[Any],
    skills: Iterable[Any] | None,
    *,
    state: object = None,
    count_failed_calls: bool = False,
    now: datetime | None = None,
    decisions: bool = False,
) -> ReplayReport:
    """Replay ``skills`` over ``traces`` with the gate's own decision.

    Args:
        traces: ``Trace`` objects (anything with ``id``, ``messages``, ``outcome``), read once, streaming.
        skills: the rules, in catalog order (skills, or a ``RuleSet``).
        state: the state the rules' state predicates see (default: an empty state, as a turn without one).
        count_failed_calls: count a failed earlier result as a call, as the gate option of that name.
        now: the time the rules' expressions see, for every call (zone-less: UTC; None = the time replay starts).
        decisions: list every blocked or would-be blocked call in ``ReplayReport.decisions``.

    Returns:
        A ``ReplayReport``; memory does not grow with the number of traces
        (but for ``decisions``, one small record per blocked call).

    Raises:
        ValidationError: ``now`` is not a datetime.
    """
    ruleset = rules_of(skills)
    state = state if state is not None else {}
    bindings = _bindings(state, now)
    guarded: list[Rule] = [rule for rule in ruleset.rules if rule.action_tool is not None]
    tallies: dict[int, _Tally] = {id(rule): _Tally() for rule in guarded}
    listed: list[ReplayDecision] = []
    count = 0
    any_outcome = False
    for trace in traces:
        count += 1
        outcome = trace.outcome
        any_outcome = any_outcome or outcome is not None
        reader = HistoryReader()
        index = -1
        for message in trace.messages:
            calls = reader.feed(message)  # an AI message adds no call made: the history is the one before it
            if calls:
                history = reader.history()
                allowed: dict[str, list[Any]] = {}  # calls of each tool allowed earlier in this batch, as in the gate
                for call in calls:
                    index += 1
                    candidates = ruleset.for_tool(call.name)
                    if not candidates:
                        continue
                    for rule in candidates:
                        tallies[id(rule)].checked += 1
                    earlier = allowed.setdefault(call.name, [])
                    decision = decide_call(ruleset, call, history, state, filtered=True,
                                           count_failed=count_failed_calls, enforce_shadow=True,
                                           bindings=bindings, in_flight=tuple(earlier))
                    if decision.blocking is None:
                        earlier.append(call.args)
                        continue
                    failing = [(r, c) for r, c in _checks(candidates, decision) if not c.satisfied]
                    for rule, _ in failing:
                        tallies[id(rule)].alone += 1
                    if decisions:
                        listed.append(_decision(str(trace.id), index, decision, failing))
                    tally = tallies[id(next(r for r, c in failing if c is decision.blocking))]
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
                   t.success if any_outcome else None, t.failure if any_outcome else None, t.alone)
        for rule in guarded for t in (tallies[id(rule)],)
    ], listed)
