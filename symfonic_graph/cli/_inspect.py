"""``symfonic-graph doctor`` and ``explain``."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio

from symfonic_graph.cli._common import add_json_flag, add_scope_flags, emit, scope_of
from symfonic_graph.cli._connect import open_store
from symfonic_graph.cli._rules_trust import parse_now
from symfonic_graph.cli._tenants import notice_if_empty
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.traces import load_traces
from symfonic_graph.memory.layers import ProceduralLayer
from symfonic_graph.memory.turn import DEFAULT_MAX_TRIGGERS
from symfonic_graph.ops.doctor import diagnose
from symfonic_graph.rules.gate import GateDecision, explain_tool_call
from symfonic_graph.rules.ruleset import SkillCheck
from symfonic_graph.shape.records import bare_identifier


def register(sub: Any) -> None:
    doctor = sub.add_parser("doctor", help="report malformed graph data and missing indexes")
    add_json_flag(doctor)
    doctor.add_argument("--strict", action="store_true", help="exit 1 when anything is found")
    doctor.add_argument("--tenant", default=None, help="check only this tenant's nodes")
    doctor.add_argument("--max-triggers", type=int, default=DEFAULT_MAX_TRIGGERS,
                        help="pending triggers a turn reads at most (TurnMemory's max_triggers; default %(default)s)")
    doctor.set_defaults(handler=lambda a: anyio.run(_doctor, a))

    explain = sub.add_parser("explain", help="print the gate's decision trace for one tool call")
    add_scope_flags(explain)
    add_json_flag(explain)
    explain.add_argument("--tool", required=True, help="the tool the model wants to call")
    explain.add_argument("--state", type=Path, default=None, help="a JSON file with the graph state")
    explain.add_argument("--called", default="", help="comma-separated tools already called this run")
    explain.add_argument("--messages", type=Path, default=None,
                         help="a JSON file with the conversation so far (a list of messages, or one trace "
                              "object with a `messages` list), read as the gate reads it; replaces --called")
    explain.add_argument("--args", dest="call_args", default=None,
                         help="the call's arguments as a JSON object (for same_args, facts, checks and limits)")
    explain.add_argument("--now", default=None, metavar="TS",
                         help="the time the rules' expressions see, an ISO timestamp (no zone: UTC; default: now)")
    explain.add_argument("--count-failed-calls", action="store_true",
                         help="count failed earlier results as calls, as a wiring with count_failed_calls=True does")
    explain.set_defaults(handler=lambda a: anyio.run(_explain, a))


def _printable(text: str) -> str:
    """``text`` with control characters escaped, so that each finding stays on its line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


async def _doctor(args: argparse.Namespace) -> int:
    async with open_store() as store:
        await notice_if_empty(store, args.tenant)
        findings = await diagnose(store, args.tenant, max_triggers=args.max_triggers)
        waiting = await store.waiting_migrations()
    if waiting:  # not a problem of the data, so no finding: a rollout in progress is normal
        print(f"notice: migrations {waiting} wait for the end of the rollout; once every process runs this "
              "release, run `symfonic-graph schema apply --after-rollout`", file=sys.stderr)
    text = "\n".join(_printable(f"[{f.check}] {f.label} {f.node} in {f.where()}: {f.problem}") for f in findings)
    emit(args, [asdict(f) for f in findings], text or "no problems found")
    return 1 if findings and args.strict else 0


def _load_state(path: Path | None) -> Any:
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValidationError(f"--state {path}", f"not a readable JSON file: {exc}") from None


def check_status(check: SkillCheck) -> str:
    """What a matched skill says of the call: what is missing, refused or could not be evaluated, or "satisfied".

    Example:
        >>> check_status(SkillCheck("Cancel", "s1", ("check: Too late.",), (), refused=("Too late.",)))
        'not allowed: Too late.'
    """
    parts = []
    if check.missing:
        parts.append("missing " + ", ".join(check.missing))
    if check.refused:
        parts.append("not allowed: " + "; ".join(dict.fromkeys(check.refused)))
    if check.errors:
        parts.append("could not be evaluated: " + "; ".join(dict.fromkeys(check.errors)))
    return "; ".join(parts) or "satisfied"


def render_decision(decision: GateDecision) -> str:
    """The decision trace as readable lines."""
    lines = [f"tool: {decision.tool_name}", f"verdict: {decision.verdict}"]
    lines.append(f"called before: {', '.join(sorted(decision.called)) or '(nothing)'}")
    for check in decision.matched:
        lines.append(f"matched skill {check.label or '<unnamed>'} ({check.skill_id}): "
                     f"requires {', '.join(check.required) or '(nothing)'} -> {check_status(check)}")
    for dropped in decision.dropped:
        lines.append(f"dropped skill {dropped.label or '<unnamed>'} ({dropped.skill_id}): "
                     f"predicate {dropped.predicate!r} does not hold ({dropped.reason})")
    for check in decision.shadowed:
        lines.append(f"shadow skill {check.label or '<unnamed>'} ({check.skill_id}) would have blocked: "
                     f"{check_status(check)} (reported, not enforced)")
    content = decision.content()
    if content:
        lines.append(f"error returned to the model: {content}")
    return "\n".join(lines)


def _load_messages(path: Path | None) -> list[Any] | None:
    """The conversation of ``--messages``: one trace, read by the traces reader replay and mining use."""
    if path is None:
        return None
    traces = list(itertools.islice(load_traces(path), 2))
    if len(traces) != 1:
        raise ValidationError(f"--messages {path}", f"must hold one conversation, found {len(traces) or 'none'}"
                              f"{' or more' if len(traces) > 1 else ''}")
    return list(traces[0].messages)


def _load_args(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValidationError("--args", f"not a JSON object: {exc}") from None
    if not isinstance(data, dict):
        raise ValidationError("--args", "must be a JSON object, e.g. '{\"order_id\": \"1003\"}'")
    return data


async def _explain(args: argparse.Namespace) -> int:
    # Without --state, the predicates see an empty state, as a turn without that state would.
    state = _load_state(args.state)
    state = {} if state is None else state
    called = [c.strip() for c in args.called.split(",") if c.strip()]
    messages = _load_messages(args.messages)
    call_args = _load_args(args.call_args)
    now = parse_now(args.now) if args.now is not None else None
    async with open_store() as store:
        await notice_if_empty(store, args.tenant)
        skills = await ProceduralLayer(store).query_skills(scope_of(args), action_tool=args.tool)
    decision = explain_tool_call(skills, args.tool, state=state, called=called, messages=messages, args=call_args,
                                 count_failed_calls=args.count_failed_calls, now=now)
    data = {
        "tool": decision.tool_name,
        "verdict": decision.verdict,
        "called": sorted(decision.called),
        "matched": [{"label": c.label, "skill_id": c.skill_id, "required": list(c.required),
                     "missing": list(c.missing), "refused": list(c.refused), "errors": list(c.errors)}
                    for c in decision.matched],
        "dropped": [{"label": d.label, "skill_id": d.skill_id, "predicate": d.predicate, "reason": d.reason}
                    for d in decision.dropped],
        "shadowed": [{"label": c.label, "skill_id": c.skill_id, "missing": list(c.missing),
                      "refused": list(c.refused), "errors": list(c.errors)} for c in decision.shadowed],
        "content": decision.content(),
    }
    note = _called_note(decision, called, messages)
    if note:
        data["note"] = note
    emit(args, data, render_decision(decision) + (f"\nnote: {note}" if note else ""))
    return 0


def _called_note(decision: GateDecision, called: list[str], messages: list[Any] | None) -> str | None:
    """Why a ``same_args`` precondition stays missing though ``--called`` names its tool, or None."""
    if messages is not None or not called:
        return None
    bound = [m for c in decision.matched for m in c.missing
             if "(same " in m and bare_identifier(m.split(" (same", 1)[0]) in called]
    if not bound:
        return None
    return (f"--called names tools without arguments, so it never meets a precondition bound to the call's "
            f"arguments ({'; '.join(bound)}); give the conversation, with the earlier call's arguments, "
            "with --messages")
