"""Lifecycle markers: retract and restore (soft delete), prune and erase (hard delete), the catalog version.

Every marker write takes the tenant's catalog lock and bumps its catalog, so
cached catalogs read the change on the next turn.
"""

from __future__ import annotations

import logging
from typing import Any

from symfonic_graph._store.changes import Changes, marker_change, who
from symfonic_graph._store.guards import one_target
from symfonic_graph._store.keys import positive_count
from symfonic_graph._store.steps import Step
from symfonic_graph.errors import ValidationError
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import refuse_over_cap
from symfonic_graph.shape.scope import MemoryScope, describe_scope

log = logging.getLogger("symfonic_graph.store")  # the logger's name is a contract (docs/observability.md)

# The largest age `prune` takes: beyond it a Cypher duration would overflow.
MAX_AGE_SECONDS = 100 * 365 * 24 * 3600
# Nodes `erase` deletes per transaction.
ERASE_BATCH = 1000


class Markers(Changes):
    """Soft and hard deletes of one scope's nodes."""

    async def retract(self, scope: MemoryScope, node_id: str, *, reason: str = "", actor: str | None = None) -> str:
        """Hide a node from every read (soft delete); ``restore`` undoes it. Returns the node's id.

        The change is recorded (``actor``, ``reason``, live → retracted) in
        its own transaction: ``history`` lists it.

        ``node_id`` is the node's id or, when no node of the tenant has that
        id, the ``identifier`` of a live skill or trigger of the scope.

        Raises:
            NotFoundError: the scope sees no such node.
            AuthorityError: the node belongs to another scope (e.g. tenant-wide, seen from a namespace).
            ValidationError: the identifier names several nodes of the scope; give the node id.
        """
        node = await self._marker("node_retract", scope, node_id,
                                  marker_change(scope, node_id, "retract", to="retracted", actor=actor,
                                                reason=reason or None),
                                  reason=v.text("reason", reason, required=False))
        log.info("retracted %s in %s: %s", node, describe_scope(scope), reason)
        return node

    async def restore(self, scope: MemoryScope, node_id: str, *, actor: str | None = None,
                      reason: str | None = None) -> str:
        """Undo ``retract``; ``node_id`` as for ``retract``. Returns the node's id. Recorded (retracted → live).

        Raises, besides what ``retract`` raises:
            ValidationError: the restored node would take the scope over its
                skill cap or its budget (``_limits``); nothing changes.
        """
        return await self._marker("node_restore", scope, node_id,
                                  marker_change(scope, node_id, "restore", to="live", actor=actor, reason=reason),
                                  cap=Step("skills_owned_count", scope.params(), refuse_over_cap(scope)))

    async def _marker(self, name: str, scope: MemoryScope, node_id: str, record: Step, *,
                      cap: Step | None = None, **extra: Any) -> str:
        v.text("node_id", node_id)
        params = {**scope.params(), "node_id": node_id, **extra}
        written = await self.write(
            [record, Step(name, params, one_target(scope, node_id)), *([cap] if cap is not None else []),
             ("catalog_bump", {"tenant_id": scope.tenant_id})]
        )
        return str(written.one(name)["id"])

    async def erase(self, scope: MemoryScope, *, batch_size: int = ERASE_BATCH, actor: str | None = None,
                    reason: str | None = None) -> dict[str, int]:
        """Delete every node of ``scope`` for good, in batches; return how many per label.

        ``MemoryScope(tenant, namespace)`` erases exactly that namespace (one
        end user's memory): its skills with their preconditions, triggers,
        facts and trigger-selection audit nodes; tenant-wide nodes and other
        namespaces are never touched. ``MemoryScope(tenant)`` erases the whole
        tenant (offboarding): every namespace, the tenant-wide nodes, and its
        catalog node last. Each batch of at most ``batch_size`` nodes is its own
        transaction, so a tenant of any size never needs one large
        transaction; an interrupted erase is finished by running it again. A
        scope that holds nothing erases nothing and creates nothing: every count is 0.
        An erase that deleted nodes leaves a receipt once it finishes (tenant,
        namespace, counts, time, ``actor``, ``reason``; ``erasures`` lists it),
        which no erase deletes; the scope's change records are its data, erased.

        Example:
            >>> await store.erase(MemoryScope("acme", "user-7"))
            {'Skill': 2, 'Precondition': 3, 'Trigger': 1, 'Fact': 0, 'SymfonicTriggerSelection': 0}
        """
        size = positive_count("batch_size", batch_size, most=100_000)
        who(actor, reason)  # refused before anything is deleted
        whole = scope.namespace is None
        params = {**scope.params(), "whole_tenant": whole, "limit": size}
        counts = {"Skill": 0, "Precondition": 0, "Trigger": 0, "Fact": 0, "SymfonicTriggerSelection": 0}
        while True:
            rows = (await self.write([("erase_skills_batch", params)]))["erase_skills_batch"]
            skills = int(rows[0]["skills"]) if rows else 0
            if skills == 0:
                break
            counts["Skill"] += skills
            counts["Precondition"] += int(rows[0]["preconditions"] or 0)
        while True:
            rows = (await self.write([("erase_nodes_batch", params)]))["erase_nodes_batch"]
            if not rows:
                break
            for row in rows:
                counts[str(row["label"])] = counts.get(str(row["label"]), 0) + int(row["nodes"])
        tenant = {"tenant_id": scope.tenant_id}
        if whole:  # the catalog node only if there is one: a lock (MERGE) would create it, and count it
            rows = (await self.write([("erase_catalog", tenant)]))["erase_catalog"]
            counts["SymfonicCatalog"] = int(rows[0]["catalogs"]) if rows else 0
        elif counts["Skill"]:
            await self.write([("catalog_bump", tenant)])  # cached catalogs of the tenant are read again
        if sum(counts.values()):
            await self._erasure_receipt(scope, counts, actor=actor, reason=reason)
        log.info("erased %s: %s", describe_scope(scope) if not whole else f"tenant {scope.tenant_id} (whole)", counts)
        return counts

    async def prune(self, scope: MemoryScope, *, older_than_seconds: float) -> int:
        """Hard-delete this scope's own nodes (exactly its namespace) retracted more than ``older_than_seconds`` ago."""
        age = older_than_seconds
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not 0 <= age <= MAX_AGE_SECONDS:
            raise ValidationError(
                "older_than_seconds", f"must be a number of seconds from 0 to {MAX_AGE_SECONDS} (100 years)"
            )
        # The catalog lock first: a restore or a re-seed of a skill holds it until it commits, so the prune
        # reads their result and never deletes what they brought back (retracted_prune re-checks triggers).
        written = await self.write(
            [("catalog_lock", {"tenant_id": scope.tenant_id}),
             ("retracted_prune", {**scope.params(), "older_than_seconds": older_than_seconds})]
        )
        rows = written["retracted_prune"]
        return int(rows[0]["pruned"]) if rows else 0

    async def catalog_version(self, scope: MemoryScope) -> int:
        """The tenant's catalog version: bumped by every library write to its skills."""
        rows = await self.read("catalog_version", tenant_id=scope.tenant_id)
        return int(rows[0]["version"]) if rows else 0
