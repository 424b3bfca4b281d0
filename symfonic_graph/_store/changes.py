"""Changes are records: who changed a rule, why, when and what, and the receipts of erasures.

Every lifecycle change (approve, reject, shadow, enforce, retract, restore)
writes one ``:SymfonicChange`` node in the change's own transaction: a step
run just before the change reads the value it replaces, so the change and its
record commit together or not at all. An erase leaves one ``:SymfonicErasure``
receipt (tenant, namespace, counts, time, actor, reason) that no erase deletes.

``actor=None`` is recorded as null: the library does not know who called it
(the CLI passes the OS user by default). ``reason=None`` is recorded as null.

Example:
    >>> await store.history(MemoryScope("acme"), "refund-needs-lookup")
    [{'at': '2026-...', 'actor': 'ana', 'reason': 'reviewed', 'change': 'approve', 'from': 'draft', 'to': 'approved'}]
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from symfonic_graph._store.steps import Step
from symfonic_graph._store.transport import Transport
from symfonic_graph.errors import ValidationError
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape.scope import MemoryScope

MAX_ACTOR_CHARS = 200
MAX_REASON_CHARS = 2000


def who(actor: str | None, reason: str | None) -> dict[str, str | None]:
    """The validated ``actor`` and ``reason`` parameters of a change (None stays None: unknown).

    Example:
        >>> who("ana", None)
        {'actor': 'ana', 'reason': None}
    """
    return {"actor": _bounded("actor", actor, MAX_ACTOR_CHARS), "reason": _bounded("reason", reason, MAX_REASON_CHARS)}


def _bounded(field: str, value: str | None, most: int) -> str | None:
    if value is None:
        return None
    text = v.text(field, value, required=False)
    if len(text) > most:
        raise ValidationError(field, f"must be at most {most} characters, got {len(text)}")
    return text


def skill_change(scope: MemoryScope, skill_id: str, change: str, *, field: str, to: str, default_from: str,
                 actor: str | None, reason: str | None) -> Step:
    """The record step of a change to a skill's ``field``; put it just before the change's own step."""
    return Step("change_record_skill", {**scope.params(), "skill_id": skill_id, "change": change, "field": field,
                                        "default_from": default_from, "to": to, **who(actor, reason)})


def marker_change(scope: MemoryScope, node_id: str, change: str, *, to: str, actor: str | None,
                  reason: str | None) -> Step:
    """The record step of a retract or restore; put it just before the marker's own step."""
    return Step("change_record_marker", {**scope.params(), "node_id": node_id, "change": change, "to": to,
                                         **who(actor, reason)})


class Changes(Transport):
    """Reading the records: a node's history, the erasure receipts; writing a receipt."""

    async def history(self, scope: MemoryScope, target: str) -> list[dict[str, Any]]:
        """The recorded changes of one node of exactly ``scope`` (its id or identifier), oldest first.

        Each is ``{"at", "actor", "reason", "change", "from", "to"}``; another
        scope's records are never read.
        """
        v.text("target", target)
        rows = await self.read("change_history", **scope.params(), target=target)
        return [{k: r[k] for k in ("at", "actor", "reason", "change", "from", "to")} for r in rows]

    async def erasures(self, tenant_id: str | None = None) -> list[dict[str, Any]]:
        """The erasure receipts, oldest first: one tenant's, or every tenant's when ``tenant_id`` is None."""
        if tenant_id is not None:
            MemoryScope(tenant_id)  # validated like any tenant id
        rows = await self.read("erasures_list", tenant_id=tenant_id)
        return [{**r, "counts": json.loads(r["counts"])} for r in rows]

    async def _erasure_receipt(self, scope: MemoryScope, counts: Mapping[str, int], *, actor: str | None,
                               reason: str | None) -> None:
        await self.write([("erasure_receipt", {**scope.params(), "counts": json.dumps(dict(counts), sort_keys=True),
                                               **who(actor, reason)})])
