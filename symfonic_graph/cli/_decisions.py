"""``symfonic-graph decisions prune`` and ``symfonic-graph rules report``: the decision log, for an operator.

The log is what ``Neo4jDecisionLog`` wrote (``:SymfonicDecision`` nodes, one
per block, would-block, refusal, outage pass-through and stale-rules decision).
"""

from __future__ import annotations

import argparse
import re
from typing import Any

import anyio

from symfonic_graph.cli._common import add_json_flag, add_scope_flags, emit
from symfonic_graph.cli._connect import open_store
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.decision_log import decision_totals, prune_decisions, report_decisions

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AGE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")


def age_seconds(flag: str, value: str) -> float:
    """An age such as ``30d``, ``12h``, ``90m``, ``2w`` or ``3600`` (seconds), in seconds.

    Example:
        >>> age_seconds("--older-than", "30d"), age_seconds("--since", "90m")
        (2592000.0, 5400.0)
    """
    match = _AGE.match(value)
    if match is None:
        raise ValidationError(flag, f"must be an age such as 30d, 12h, 90m, 2w or seconds, got {value!r}")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def register(sub: Any, rules: Any) -> None:
    """``decisions prune`` (a command of its own) and ``rules report`` (into the ``rules`` actions)."""
    decisions = sub.add_parser("decisions", help="the decision log: prune old decisions").add_subparsers(
        dest="action", required=True, metavar="ACTION")
    prune = decisions.add_parser(
        "prune", help="delete a tenant's decisions older than an age",
        description="Delete the tenant's :SymfonicDecision nodes recorded more than --older-than ago "
                    "(30d, 12h, 90m, 2w or seconds), in batches. Prints how many.")
    prune.add_argument("--tenant", required=True, help="tenant id (exact)")
    prune.add_argument("--older-than", required=True, metavar="AGE", help="30d, 12h, 90m, 2w, or seconds")
    add_json_flag(prune)
    prune.set_defaults(handler=lambda a: anyio.run(_prune, a))

    report = rules.add_parser(
        "report", help="per rule: blocks, would-blocks and conversations, from the decision log",
        description="Per rule of the scope, from the decision log: its blocks, its would-blocks (shadow), the "
                    "conversations they happened in (distinct LangGraph thread ids; a decision without one "
                    "counts its call id) and up to three recent examples.")
    add_scope_flags(report)
    report.add_argument("--since", default="7d", metavar="AGE", help="how far back (default 7d)")
    add_json_flag(report)
    report.set_defaults(handler=lambda a: anyio.run(_report, a))


async def _prune(args: argparse.Namespace) -> int:
    age = age_seconds("--older-than", args.older_than)
    async with open_store() as store:
        pruned = await prune_decisions(store, args.tenant, older_than_seconds=age)
    emit(args, {"tenant": args.tenant, "pruned": pruned},
         f"pruned {pruned} decision(s) of tenant {args.tenant} older than {args.older_than}")
    return 0


async def _report(args: argparse.Namespace) -> int:
    since = age_seconds("--since", args.since)
    async with open_store() as store:
        rules = await report_decisions(store, args.tenant, namespace=args.namespace, since_seconds=since)
        totals = await decision_totals(store, args.tenant, namespace=args.namespace, since_seconds=since)
    lines = [f"{r['rule_id']} ({r['identifier'] or 'no identifier'}): {r['blocks']} block(s), "
             f"{r['would_blocks']} would-block(s), {r['conversations']} conversation(s)" for r in rules]
    head = f"decisions of tenant {args.tenant} since {args.since}: " + ", ".join(
        f"{n} {kind}" for kind, n in totals.items())
    emit(args, {"tenant": args.tenant, "namespace": args.namespace, "since": args.since, "decisions": totals,
                "rules": rules}, "\n".join([head, *lines]))
    return 0
