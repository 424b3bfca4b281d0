"""Rules an operator can trust: ``rules replay|mine`` and ``skills approve|reject|shadow|enforce``.

The ``rules`` and ``skills`` commands are made once by ``build_parser``; this
module adds its actions to them.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from symfonic_graph._store import GraphMemoryStore, Step, owned_by, skill_change
from symfonic_graph.cli._common import actor_of, add_json_flag, add_scope_flags, add_who_flags, emit, scope_of
from symfonic_graph.cli._connect import open_store
from symfonic_graph.errors import ValidationError
from symfonic_graph.learning.mining import MiningReport, mine
from symfonic_graph.learning.replay import ReplayReport, replay
from symfonic_graph.learning.traces import load_traces
from symfonic_graph.memory.layers import ProceduralLayer
from symfonic_graph.shape.scope import MemoryScope


def register(rules: Any, skills: Any) -> None:
    """``rules replay|mine`` and ``skills approve|reject|shadow|enforce``, into those commands' actions."""
    rp = rules.add_parser("replay", help="what the scope's rules would have blocked in recorded conversations")
    rp.add_argument("traces", type=Path, help="JSON or JSONL file of traces, gzip-compressed or not (docs/rules.md)")
    add_scope_flags(rp)
    add_json_flag(rp)
    rp.add_argument("--include-drafts", action="store_true", help="replay draft rules too")
    rp.add_argument("--now", default=None, metavar="TS",
                    help="the time the rules' expressions see, an ISO timestamp (no zone: UTC; default: now)")
    rp.set_defaults(handler=lambda a: anyio.run(_replay, a))

    mine = rules.add_parser("mine", help='propose "call A before B" rules from recorded conversations')
    mine.add_argument("traces", type=Path, help="JSON or JSONL file of traces, gzip-compressed or not (docs/rules.md)")
    add_scope_flags(mine)
    add_json_flag(mine)
    mine.add_argument("--actions", default=None, help="comma-separated tools that may be guarded (default: all)")
    mine.add_argument("--min-support", type=int, default=5, help="fewest conversations calling the action")
    mine.add_argument("--min-confidence", type=float, default=0.95, help="least share without a violation")
    mine.add_argument("--outcomes", choices=("success", "all"), default="success",
                      help="which traces count once any has an outcome: successful ones (default) or all")
    mine.add_argument("--propose", action="store_true", help="write the proposals as draft skills")
    mine.set_defaults(handler=lambda a: anyio.run(_mine, a))

    for name, helptext in (("approve", "approve a draft: turns enforce it"),
                           ("reject", "reject a skill: turns stop seeing it"),
                           ("shadow", "report what the rule would block, never block (bumps the catalog)"),
                           ("enforce", "enforce a shadow rule (bumps the catalog)")):
        p = skills.add_parser(name, help=helptext)
        p.add_argument("skill", metavar="ID", help="the skill's id, or its identifier")
        add_scope_flags(p)
        add_json_flag(p)
        add_who_flags(p)
        p.set_defaults(handler=lambda a, n=name: anyio.run(_skill_action, a, n))
    history = skills.add_parser("history", help="a rule's recorded changes: who, why, when, old -> new")
    history.add_argument("skill", metavar="ID", help="the skill's id, or its identifier")
    add_scope_flags(history)
    add_json_flag(history)
    history.set_defaults(handler=lambda a: anyio.run(_history, a))


# --- replay -------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def parse_now(text: str) -> datetime:
    """``--now``: an ISO timestamp; without a zone it is UTC.

    Example:
        >>> parse_now("2026-05-01T12:00:00").isoformat()
        '2026-05-01T12:00:00+00:00'
    """
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError("--now", f"must be an ISO timestamp such as 2026-05-01T12:00:00Z, got {text!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


LISTED_DECISIONS = 20
"""Blocked calls the readable replay lists (``--json`` lists them all)."""


def replay_text(report: ReplayReport, scope: MemoryScope) -> str:
    """The readable table of ``rules replay``: per rule, then the first blocked calls."""
    head = f"replayed {report.traces} trace(s) against {len(report.rules)} rule(s) of {scope!r}"
    if not report.rules:
        return head + "\n(no rules with an action tool)"
    rows = [[r.label or "<unnamed>", r.skill_id or "", r.action, r.enforcement, str(r.checked), str(r.blocked),
             str(r.blocked_alone), _opt(r.blocked_in_success), _opt(r.blocked_in_failure), ", ".join(r.trace_ids)]
            for r in report.rules]
    text = head + "\n" + _table(["rule", "id", "action", "mode", "checked", "blocked", "alone", "in success",
                                  "in failure", "example traces"], rows)
    if report.decisions:
        shown = report.decisions[:LISTED_DECISIONS]
        text += f"\n\nblocked calls ({len(shown)} of {len(report.decisions)}; --json lists every one):\n"
        text += _table(["trace", "call", "tool", "mode", "reason"],
                       [[d.trace, f"#{d.index} {d.call_id or ''}".rstrip(), d.tool, d.mode, d.reason] for d in shown])
    return text


async def _replay(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    now = None if args.now is None else parse_now(args.now)  # refused before anything is read
    async with open_store() as store:
        skills = await ProceduralLayer(store).query_skills(scope, include_drafts=args.include_drafts)
    report = replay(load_traces(args.traces), skills, now=now, decisions=True)
    emit(args, {"tenant_id": scope.tenant_id, "namespace": scope.namespace, **report.to_dict()},
         replay_text(report, scope))
    return 0


# --- mine ---------------------------------------------------------------------------


def _pair(action: str, precondition: str, same_args: tuple[str, ...] = ()) -> str:
    same = f" (same {', '.join(same_args)})" if same_args else ""
    return f"{precondition}{same} -> {action}"


def mine_text(report: MiningReport, outcomes: list[dict[str, Any]] | None) -> str:
    """The readable tables of ``rules mine``: the proposals, then the near misses."""
    if report.proposals:
        rows = []
        for i, p in enumerate(report.proposals):
            row = [_pair(p.action, p.precondition, p.same_args), str(p.support), f"{p.confidence:.3f}",
                   _opt(p.failures_without), ", ".join(p.examples)]
            if outcomes is not None:
                row.append(f"{outcomes[i]['outcome']} {','.join(outcomes[i]['ids'])}")
            rows.append(row)
        header = ["A -> B (call A before B)", "support", "confidence", "failures without", "examples"]
        text = _table(header + (["draft"] if outcomes is not None else []), rows)
    else:
        text = "no rule reaches the support and confidence asked for"
    if report.near_misses:
        rows = [[_pair(n.action, n.precondition), str(n.support), f"{n.confidence:.3f}",
                 f"{n.support_short} more" if n.support_short else "-",
                 f"{n.confidence_short:.3f} under" if n.confidence_short else "-"] for n in report.near_misses]
        text += "\n\nnear misses (not proposed):\n" + _table(
            ["A -> B", "support", "confidence", "support short", "confidence short"], rows)
    return text


async def _mine(args: argparse.Namespace) -> int:
    actions = None if args.actions is None else [a.strip() for a in args.actions.split(",") if a.strip()]
    report = mine(load_traces(args.traces), actions=actions, min_support=args.min_support,
                  min_confidence=args.min_confidence, outcomes=args.outcomes)
    outcomes = None
    if args.propose:
        async with open_store() as store:
            outcomes = await ProceduralLayer(store).propose_mined(scope_of(args), report.proposals)
    data = report.to_dict()
    if outcomes is not None:
        data["proposals"] = [{**p, "draft": outcomes[i]} for i, p in enumerate(data["proposals"])]
    emit(args, {"outcomes": args.outcomes, **data}, mine_text(report, outcomes))
    return 0


# --- skills approve | reject | shadow | enforce ----------------------------------------------


async def resolve_skill(layer: ProceduralLayer, scope: MemoryScope, given: str) -> str:
    """``given`` as a skill id: itself when a skill has that id, else the id of the skill with that identifier."""
    skills = await layer.query_skills(scope, include_drafts=True)
    if any(s.id == given for s in skills):
        return given
    named = [s for s in skills if s.identifier == given]
    owned = [s for s in named if s.namespace == scope.namespace] or named
    return owned[0].id if owned else given  # unknown: the write says it is not found


async def set_enforcement(store: GraphMemoryStore, scope: MemoryScope, skill_id: str, enforcement: str, *,
                          actor: str | None = None, reason: str | None = None) -> None:
    """Shadow or enforce a skill in its owning scope, and bump the catalog so turns read it again; recorded."""
    params = {**scope.params(), "skill_id": skill_id, "enforcement": enforcement}
    await store.write([skill_change(scope, skill_id, enforcement, field="enforcement", to=enforcement,
                                    default_from="enforce", actor=actor, reason=reason),
                       Step("skill_set_enforcement", params, owned_by(scope, skill_id)),
                       Step("catalog_bump", {"tenant_id": scope.tenant_id})])


_DONE = {"approve": "approved", "reject": "rejected", "shadow": "shadowed", "enforce": "enforced"}


async def _skill_action(args: argparse.Namespace, name: str) -> int:
    scope = scope_of(args)
    async with open_store() as store:
        layer = ProceduralLayer(store)
        skill_id = await resolve_skill(layer, scope, args.skill)
        who = {"actor": actor_of(args), "reason": args.reason}
        if name == "approve":
            await layer.approve(scope, skill_id, **who)
        elif name == "reject":
            await layer.reject(scope, skill_id, **who)
        else:
            await set_enforcement(store, scope, skill_id, name, **who)
    emit(args, {"action": name, "skill_id": skill_id, "tenant_id": scope.tenant_id, "namespace": scope.namespace},
         f"{_DONE[name]} {skill_id}")
    return 0


async def _history(args: argparse.Namespace) -> int:
    scope = scope_of(args)
    async with open_store() as store:  # the id, or the identifier: the records of each node it named
        changes = await store.history(scope, args.skill)
    lines = [f"{c['at']}  {c['change']}  {c['from']} -> {c['to']}  by {c['actor'] or '(unknown)'}"
             + (f": {c['reason']}" if c["reason"] else "") for c in changes]
    emit(args, changes, "\n".join(lines) or f"no recorded changes of {args.skill}")
    return 0
