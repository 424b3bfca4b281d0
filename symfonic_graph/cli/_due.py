"""``symfonic-graph triggers due``: time reminders that became due, for cron-style delivery.

Lists without claiming; with ``--claim`` the listed triggers are claimed and
recorded as delivered in one go (the caller delivers what it prints: a
delivery that then fails is not retried -- run a ``TriggerDispatcher`` for
that).

Example::

    symfonic-graph triggers due --tenant acme --json
    symfonic-graph triggers due --tenant acme --claim --json | deliver-notifications
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from symfonic_graph.cli._common import add_json_flag, emit
from symfonic_graph.cli._connect import open_store
from symfonic_graph.memory.dispatch import TriggerDispatcher
from symfonic_graph.memory.layers import ProspectiveLayer
from symfonic_graph.shape.models import Trigger
from symfonic_graph.shape.scope import MemoryScope


def register_due(actions: Any) -> None:
    due = actions.add_parser("due", help="time reminders due now and not delivered yet (every end user's)")
    due.add_argument("--tenant", required=True, help="tenant id (exact)")
    due.add_argument("--namespace", default=None,
                     help="only those this namespace sees (default: every namespace of the tenant)")
    due.add_argument("--limit", type=int, default=100, help="at most this many, longest due first (default 100)")
    due.add_argument("--claim", action="store_true",
                     help="claim them and record them delivered: another run or dispatcher never gets them")
    add_json_flag(due)
    due.set_defaults(handler=lambda a: anyio.run(_due, a))


def _line(t: Trigger) -> str:
    due = t.due_at.isoformat() if t.due_at is not None else "?"
    return f"{t.id}  {t.namespace or '(tenant-wide)'}  due {due}  ->  {t.task}"


async def _due(args: argparse.Namespace) -> int:
    async with open_store() as store:
        if args.claim:
            if args.namespace is not None:
                raise SystemExit("triggers due: --claim takes the whole tenant; leave out --namespace")
            dispatcher = TriggerDispatcher(store, lambda t: None, tenants=[args.tenant])
            triggers = await dispatcher.claim(args.tenant, limit=args.limit)
            await dispatcher.delivered(args.tenant, [t.id for t in triggers])
        else:
            layer = ProspectiveLayer(store)
            scope = None if args.namespace is None else MemoryScope(args.tenant, args.namespace)
            triggers = await layer.due(scope, tenant=args.tenant, limit=args.limit)
    emit(args, [t.model_dump(mode="json") for t in triggers], "\n".join(map(_line, triggers)) or "(nothing due)")
    return 0
