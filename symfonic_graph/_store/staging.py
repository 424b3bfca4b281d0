"""Staged writes: nodes written under a ``write_id`` stay invisible until one publish flips them all.

Visibility flips by one append to the tenant's catalog node
(``published_writes``), read once per query, so a reader sees all of a
write or none of it; fold removes the staging labels once no reader can
still see the old state; discard deletes a staged write.

A reader reads the list first and the nodes after, without locks, and Neo4j
applies a committed transaction's records one at a time: the transaction that
lists a write must change nothing else the visibility rule reads, or a reader
could see the new list beside a node still in its old state (two versions of
one skill). So the nodes a write replaces are marked in transactions of their
own first (``write_mark_replaced_batch``), and the flip lists the write only
when it finds every one marked.
"""

from __future__ import annotations

from collections.abc import Sequence

from symfonic_graph._store.changes import who
from symfonic_graph._store.guards import refuse_held_keys, refuse_published
from symfonic_graph._store.keys import positive_count, required_write_id
from symfonic_graph._store.steps import Row, Statement, Step, Written
from symfonic_graph._store.transport import PUBLISH_SETTLE_SECONDS, Transport
from symfonic_graph.errors import SymfonicGraphError
from symfonic_graph.shape._limits import refuse_over_cap
from symfonic_graph.shape.scope import MemoryScope

# Nodes a staged write's publish, fold or discard changes per transaction (and seed files write per batch).
STAGE_BATCH = 5000


# Flips tried before a publish gives up when, each time, a concurrent write gave one of its keys to a node it had
# not marked yet (another publish of the same identifiers between its marking and its flip).
_FLIP_ATTEMPTS = 8


class _MoreToPrepare(Exception):
    """Raised inside a publish's flip when the write is too large for one transaction: it is rolled back."""


class _Unmarked(Exception):
    """Raised inside a publish's flip when it would hide a node not marked before: it is rolled back, marked again."""


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
                return await self._marked_flip(scopes, wid, size, record, small=True)  # marked, then listed
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
        return await self._marked_flip(scopes, wid, size, record)

    async def _marked_flip(self, scopes: Sequence[MemoryScope], write_id: str, size: int,
                           record: dict[str, str | None], *, small: bool = False) -> int:
        """Mark what the write replaces, committed, then flip; again when a write in between moved a key.

        With ``small``, a write with more to mark than one transaction holds
        raises ``_MoreToPrepare`` instead (publish then prepares in batches,
        which mark as they go).
        """
        for _ in range(_FLIP_ATTEMPTS):
            await self._mark(scopes, write_id, size, small=small)
            try:
                return await self._flip(scopes, write_id, size, record)
            except _Unmarked:
                continue
        raise SymfonicGraphError(
            f"publish of write {write_id!r}: {_FLIP_ATTEMPTS} times, a concurrent write gave one of its keys to "
            "another node between its marking and its flip; nothing was listed: publish again")

    async def _mark(self, scopes: Sequence[MemoryScope], write_id: str, size: int, *, small: bool) -> None:
        """Mark the nodes the write replaces (``write_mark_replaced_batch``), at most ``size`` per transaction.

        Committed before the flip: the flip's transaction, which lists the
        write, must change nothing a reader's visibility rule reads.
        """
        pending = list(scopes)
        while pending:
            share = max(1, size // len(pending))
            steps = [Step("catalog_lock", {"tenant_id": t}, key=f"lock:{t}")
                     for t in sorted({s.tenant_id for s in pending})]
            steps += [Step("write_mark_replaced_batch", {**s.params(), "write_id": write_id, "limit": share},
                           key=f"mark:{i}") for i, s in enumerate(pending)]
            written = await self.write(steps)
            pending = [s for i, s in enumerate(pending) if int(written.one(f"mark:{i}")["marked"]) >= share]
            if small and pending:
                raise _MoreToPrepare  # more than one transaction holds: prepared in batches (they mark too)

    async def _flip(self, scopes: Sequence[MemoryScope], write_id: str, size: int,
                    record: dict[str, str | None]) -> int:
        """One transaction: prepare what is left (at most ``size`` nodes in all) and list every scope's entry.

        Every node the flip hides must have been marked by an earlier
        transaction (``_mark``): one it finds unmarked rolls it back.
        """
        share = max(1, size // len(scopes))  # the flip's nodes to prepare, per scope

        def all_prepared(rows: list[Row]) -> None:
            if rows and int(rows[0]["prepared"]) >= share:
                raise _MoreToPrepare  # rolls this transaction back; publish prepares in batches first
            if rows and int(rows[0]["unmarked"]):
                raise _Unmarked  # a write since the marking gave a key to another node: mark it first

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
