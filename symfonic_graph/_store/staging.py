"""Staged writes: nodes written under a ``write_id`` stay invisible until one publish flips them all.

Visibility flips by one append to the tenant's catalog node
(``published_writes``), read once per query, so a reader sees all of a
write or none of it; fold removes the staging labels once no reader can
still see the old state; discard deletes a staged write.
"""

from __future__ import annotations

from collections.abc import Sequence

from symfonic_graph._store.changes import who
from symfonic_graph._store.guards import refuse_held_keys, refuse_published
from symfonic_graph._store.keys import positive_count, required_write_id
from symfonic_graph._store.steps import Row, Statement, Step, Written
from symfonic_graph._store.transport import PUBLISH_SETTLE_SECONDS, Transport
from symfonic_graph.shape._limits import refuse_over_cap
from symfonic_graph.shape.scope import MemoryScope

# Nodes a staged write's publish, fold or discard changes per transaction (and seed files write per batch).
STAGE_BATCH = 5000


class _MoreToPrepare(Exception):
    """Raised inside a publish's flip when the write is too large for one transaction: it is rolled back."""


class Staging(Transport):
    """Publish, fold and discard of staged writes."""

    async def publish(self, scope: MemoryScope, write_id: str, *, batch_size: int = STAGE_BATCH,
                      actor: str | None = None, reason: str | None = None) -> int:
        """Make every node staged under ``write_id`` visible at once; return how many.

        Visibility flips by one append to the tenant's catalog node, which
        readers read once per query, so a concurrent reader sees all of the
        write or none of it. The flip transaction writes only the catalog
        node: a large write is first prepared in transactions of at most
        ``batch_size`` nodes (each within ``query_timeout``), none of which
        changes what a reader sees. Writes published more than
        ``PUBLISH_SETTLE_SECONDS`` ago are folded first. The flip records
        the publish (``actor``, ``reason``, staged → published, under the
        write id: ``history(scope, write_id)``) in its own transaction.

        Example:
            >>> await store.publish(MemoryScope("acme"), "release-42")
            120
        """
        return await self.publish_scopes([scope], write_id, batch_size=batch_size, actor=actor, reason=reason)

    async def publish_scopes(
        self, scopes: Sequence[MemoryScope], write_id: str, *, batch_size: int = STAGE_BATCH,
        actor: str | None = None, reason: str | None = None,
    ) -> int:
        """``publish`` for several scopes (of one or more tenants) in one flip: all become visible together.

        A seed file of several scopes staged under one write id is published
        by this one call, so readers of every scope see the old file or the new
        one. Returns how many nodes became visible.
        """
        wid = required_write_id(write_id)
        size = positive_count("batch_size", batch_size, most=100_000)
        scopes = list(dict.fromkeys(scopes))
        record = who(actor, reason)
        with self.deadline():  # a small write: every round trip within one query_timeout
            for tenant in dict.fromkeys(s.tenant_id for s in scopes):
                # One batch of folding per publish keeps it short; the rest waits for the next one.
                await self.fold_published(MemoryScope(tenant), batch_size=size, max_batches=1)
            try:
                return await self._flip(scopes, wid, size, record)  # prepared and listed in one transaction
            except _MoreToPrepare:
                pass
        # A large write: prepared in batches, each transaction within its own query_timeout, then listed.
        for scope in scopes:
            params = {**scope.params(), "write_id": wid, "limit": size}
            lock: Statement = ("catalog_lock", {"tenant_id": scope.tenant_id})
            while True:
                held = Step("staged_keys_held", {**scope.params(), "write_id": wid}, refuse_held_keys("node"))
                rows = (await self.write([lock, held, ("write_prepare_batch", params)]))["write_prepare_batch"]
                if not rows or int(rows[0]["prepared"]) < size:
                    break
        return await self._flip(scopes, wid, size, record)

    async def _flip(self, scopes: Sequence[MemoryScope], write_id: str, size: int,
                    record: dict[str, str | None]) -> int:
        """One transaction: prepare what is left (at most ``size`` nodes in all) and list every scope's entry."""
        share = max(1, size // len(scopes))  # the flip's nodes to prepare, per scope

        def all_prepared(rows: list[Row]) -> None:
            if rows and int(rows[0]["prepared"]) >= share:
                raise _MoreToPrepare  # rolls this transaction back; publish prepares in batches first

        tenants = sorted({s.tenant_id for s in scopes})
        steps: list[Step] = [Step("catalog_lock", {"tenant_id": t}, key=f"lock:{t}") for t in tenants]
        for i, scope in enumerate(scopes):
            params = {**scope.params(), "write_id": write_id}
            steps += [Step("staged_keys_held", params, refuse_held_keys("node"), key=f"held:{i}"),
                      Step("write_prepare_batch", {**params, "limit": share}, all_prepared, key=f"prepare:{i}"),
                      Step("change_record_publish", {**params, **record}, key=f"record:{i}"),
                      Step("write_publish_listed", params, key=f"listed:{i}"),
                      # the scope as readers will now see it, within its skill cap and budget
                      Step("skills_owned_after_staging", params, refuse_over_cap(scope), key=f"cap:{i}")]
        steps += [Step("catalog_bump", {"tenant_id": t}, key=f"bump:{t}") for t in tenants]
        written = await self.write(steps)
        return sum(int(written.one(f"listed:{i}")["published"]) for i in range(len(scopes)))

    async def fold_published(
        self, scope: MemoryScope, *, settle_seconds: float | None = None, batch_size: int = STAGE_BATCH,
        max_batches: int | None = None,
    ) -> int:
        """Remove ``:SymfonicUnpublished`` from writes published over ``settle_seconds`` ago.

        In this order: the labels go (and the nodes those writes replaced are
        deleted), in transactions of at most ``batch_size`` nodes each, then
        the catalog entries; none of this changes what any reader shorter than
        the settle period sees. With ``max_batches``, stops after that many
        transactions when more is left (the next fold goes on). Returns how
        many nodes were folded.
        """
        settle = PUBLISH_SETTLE_SECONDS if settle_seconds is None else settle_seconds
        size = positive_count("batch_size", batch_size, most=100_000)
        lock: Statement = ("catalog_lock", {"tenant_id": scope.tenant_id})
        params = {"tenant_id": scope.tenant_id, "settle_seconds": settle, "limit": size}
        folded, due, batches = 0, [], 0
        while True:
            rows = (await self.write([lock, ("write_fold_batch", params)]))["write_fold_batch"]
            if not rows or not rows[0]["due"]:
                return folded
            folded += int(rows[0]["folded"])
            due = rows[0]["due"]
            if int(rows[0]["folded"]) < size and int(rows[0]["removed"]) < size:
                break
            batches += 1
            if max_batches is not None and batches >= max_batches:
                return folded
        await self.write([lock, ("write_unlist", {"tenant_id": scope.tenant_id, "entries": due})])
        return folded

    async def write_staged(
        self, scope: MemoryScope, write_id: str | None, steps: Sequence[Step | Statement]
    ) -> Written:
        """Like ``write``, but refuse a ``write_id`` this scope already published (nothing is written)."""
        if write_id is None:
            return await self.write(steps)
        lock: Statement = ("catalog_lock", {"tenant_id": scope.tenant_id})
        guard = Step("write_id_published", {**scope.params(), "write_id": write_id}, refuse_published(write_id, scope))
        return await self.write([lock, guard, *steps])

    async def discard(self, scope: MemoryScope, write_id: str, *, batch_size: int = STAGE_BATCH) -> int:
        """Delete every node staged under ``write_id`` in exactly this scope; return how many.

        In transactions of at most ``batch_size`` nodes. Serialized with
        ``publish`` on the tenant's catalog lock: of a publish and a discard of
        the same write, exactly one takes effect. A publish cut short before
        its flip is undone too (the live nodes it was replacing keep their key).
        """
        size = positive_count("batch_size", batch_size, most=100_000)
        params = {**scope.params(), "write_id": required_write_id(write_id), "limit": size}
        lock: Statement = ("catalog_lock", {"tenant_id": scope.tenant_id})
        discarded = 0
        for name, counted in (("write_discard_batch", "discarded"), ("write_unprepare_batch", "restored")):
            while True:
                rows = (await self.write([lock, (name, params)]))[name]
                done = int(rows[0][counted]) if rows else 0
                discarded += done if name == "write_discard_batch" else 0
                if done < size:
                    break
        return discarded
