"""ProspectiveLayer: stored reminders (a task, offered when a condition holds or a due time has passed)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from symfonic_graph._store import (
    MAX_COUNT,
    Check,
    GraphMemoryStore,
    Step,
    check_write_id,
    content_key,
    held_keys,
    new_id,
    owned_by,
    positive_count,
    refuse_held_keys,
    staged_keys,
    tenant_token,
    trigger_key,
)
from symfonic_graph.errors import NotFoundError, ValidationError
from symfonic_graph.shape import _embedding, _recurrence, _time
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import refuse_heavy_write, refuse_over_cap, trigger_weight
from symfonic_graph.shape.inputs import TriggerInput
from symfonic_graph.shape.models import Trigger, trigger_from_row
from symfonic_graph.shape.scope import MemoryScope, describe_scope

log = logging.getLogger("symfonic_graph.triggers")


class ProspectiveLayer:
    """Triggers in the graph: set, list pending, resolve.

    ``clock`` (epoch seconds, default ``time.time``) resolves a ``due_in``
    when a trigger is written; tests pass a fake.

    Example:
        >>> layer = ProspectiveLayer(store)
        >>> tid = await layer.set_trigger(MemoryScope("acme", "u1"),
        ...     condition="user mentions their invoice", task="Tell them it is overdue.")
        >>> [t.id for t in await layer.get_pending(MemoryScope("acme", "u1"))]
        [tid]
        >>> await layer.set_trigger(MemoryScope("acme", "u1"), task="Ask how the move went.", due_in="1d")
        '...'
    """

    def __init__(
        self, store: GraphMemoryStore, *, clock: Callable[[], float] = time.time, embeddings: Any = None,
    ) -> None:
        if not callable(clock):
            raise ValidationError("clock", f"must be a () -> float callable, got {type(clock).__name__}")
        if embeddings is not None and not callable(getattr(embeddings, "aembed_documents", None)):
            raise ValidationError("embeddings", "must be a LangChain Embeddings (with aembed_documents), "
                                                f"got {type(embeddings).__name__}")
        self.store = store
        self.clock = clock
        self.embeddings = embeddings

    async def set_trigger(
        self,
        scope: MemoryScope,
        *,
        task: str,
        condition: str | None = None,
        kind: str | None = None,
        due_at: datetime | float | str | None = None,
        due_in: timedelta | float | str | None = None,
        expires_at: datetime | float | str | None = None,
        recurrence: str | None = None,
        on_tool: str | None = None,
        same_args: Mapping[str, Any] | str | None = None,
        where: str | None = None,
        once: bool = False,
        embedding: Sequence[float] | None = None,
        identifier: str | None = None,
        write_id: str | None = None,
    ) -> str:
        """Store a pending trigger; return its id.

        ``kind`` is ``"text"`` (``condition`` matched by the caller's
        evaluator) or ``"time"`` (offered on every turn at or after
        ``due_at``, an aware datetime or epoch seconds, or ``due_in`` from
        now, a timedelta or seconds); absent, ``"time"`` when a due time is
        given. ``expires_at``: never offered at or after it. ``recurrence``
        (a time trigger): an RRULE such as ``FREQ=WEEKLY;BYDAY=MO`` started at
        the first due time (see :meth:`ack_trigger`). ``on_tool`` (kind
        ``"event"``, the default when given): offered once the conversation
        holds a successful call of that tool whose arguments include
        ``same_args`` (a mapping of argument name to value) and whose
        parsed result and arguments satisfy ``where``, a CEL expression over
        ``result`` and ``call`` (compiled here: one that does not compile is
        refused naming ``where``). ``once``: acknowledged when first offered
        (selected by a turn), exactly once however many turns race.
        ``kind="semantic"`` (the default when ``embedding`` is given):
        offered on a turn whose embedding reaches the wiring's cosine
        ``similarity`` with ``embedding``, the embedding of ``condition``;
        computed here with the layer's ``embeddings`` when not given. With an
        ``identifier``, setting it again in the same scope replaces the
        trigger (same id, new content, pending again), never duplicates: a
        call that timed out may be retried safely.

        Raises:
            ValidationError: naming the field (nothing written).
        """
        if embedding is None and kind == "semantic" and self.embeddings is not None and isinstance(condition, str):
            embedding = await self.embed(condition)
        rows = [trigger_row(scope, condition=condition, task=task, kind=kind, due_at=due_at, due_in=due_in,
                            expires_at=expires_at, recurrence=recurrence, on_tool=on_tool, same_args=same_args,
                            where=where, once=once, embedding=embedding, identifier=identifier,
                            write_id=check_write_id(write_id),
                            now=self.clock())]
        [trigger_id] = await self.write_triggers(scope, rows, write_id=rows[0]["write_id"])
        return trigger_id

    async def embed(self, condition: str) -> list[float]:
        """The embedding of a semantic trigger's ``condition``, by the layer's ``embeddings``.

        Raises:
            ValidationError: naming ``embeddings`` when the layer has none, or
                ``embedding`` when the model's answer is not a usable vector.
        """
        if self.embeddings is None:
            raise ValidationError("embeddings", "a semantic trigger without an embedding needs "
                                                "ProspectiveLayer(store, embeddings=...) to compute it")
        [vector] = await self.embeddings.aembed_documents([condition])
        return list(_embedding.vector("embedding", vector))

    async def write_triggers(
        self, scope: MemoryScope, rows: list[dict[str, Any]], *, write_id: str | None = None
    ) -> list[str]:
        """Write :func:`trigger_row` rows in one transaction; return the ids (a replaced trigger keeps its id).

        Raises:
            ValidationError: naming ``weight`` (nothing written) when the scope's pending
                triggers and skills would exceed its budget (``_limits.MAX_SCOPE_WEIGHT``).
        """
        refuse_heavy_write("triggers", sum(map(trigger_weight, rows)))
        budget = (Step("skills_owned_count", scope.params(), refuse_over_cap(scope)) if write_id is None
                  else Step("skills_owned_after_staging", {**scope.params(), "write_id": write_id},
                            refuse_over_cap(scope)))
        written = await self.store.write_staged(
            scope,
            write_id,
            [Step("trigger_keys_held", {"keys": held_keys(rows), **scope.params()}, refuse_held_keys("trigger")),
             Step("triggers_write", {"rows": rows}), budget],
        )
        return [str(i) for i in written.one("triggers_write")["ids"]]

    async def get_pending(
        self, scope: MemoryScope, *, write_id: str | None = None, limit: int | None = None
    ) -> list[Trigger]:
        """Unresolved triggers the scope sees, oldest first (at most ``limit``), due or not."""
        rows = await self.store.read("triggers_pending", **scope.params(), write_id=check_write_id(write_id),
                                     limit=MAX_COUNT if limit is None else positive_count("limit", limit))
        return [t for t in map(trigger_from_row, rows[0]["triggers"]) if t is not None]

    async def get_done(self, scope: MemoryScope, *, limit: int = 100) -> list[Trigger]:
        """The scope's acknowledged, cancelled and replaced triggers (history), most recently resolved first."""
        rows = await self.store.read("triggers_done", **scope.params(), limit=positive_count("limit", limit))
        return [t for t in map(trigger_from_row, rows[0]["triggers"]) if t is not None]

    async def get_offerable(
        self, scope: MemoryScope, *, now: datetime | float | None = None, write_id: str | None = None,
        limit: int | None = None, vector: Sequence[float] | None = None,
        similarity: float = _embedding.DEFAULT_SIMILARITY,
    ) -> list[Trigger]:
        """The triggers a turn of ``scope`` may be offered at ``now`` (default: the clock), oldest first.

        Text triggers that are pending and time triggers that are due; none
        expired or snoozed (see docs/prospective.md). With ``vector`` (the
        embedding of what the turn said), the semantic triggers whose
        embedding reaches the cosine ``similarity`` with it too.
        """
        at = _time.instant("now", self.clock() if now is None else now)
        rows = await self.store.read("triggers_offerable", **scope.params(), write_id=check_write_id(write_id),
                                     limit=MAX_COUNT if limit is None else positive_count("limit", limit), now=at,
                                     **_embedding.meaning(vector, similarity))
        return [t for t in map(trigger_from_row, rows[0]["triggers"]) if t is not None]

    async def due(
        self, scope: MemoryScope | None = None, *, tenant: str | None = None,
        now: datetime | float | None = None, limit: int = 100,
    ) -> list[Trigger]:
        """Time triggers that became due by ``now`` (default: the clock) and were not delivered yet.

        With ``scope``, those the scope sees; with ``scope=None``, those of
        every end user of ``tenant`` and its tenant-wide ones (one index
        seek). Longest due first, at most ``limit``. Listing claims nothing
        (see :class:`~symfonic_graph.memory.dispatch.TriggerDispatcher`).

        Example:
            >>> [t.namespace for t in await layer.due(tenant="acme")]
            ['user-42', 'user-7']

        Raises:
            ValidationError: neither ``scope`` nor ``tenant``, or both naming different tenants.
        """
        if scope is None:
            if tenant is None:
                raise ValidationError("tenant", "is required when scope is None (whose reminders to list)")
            tenant_id, namespace, every = v.text("tenant", tenant), None, True
        else:
            if tenant is not None and tenant != scope.tenant_id:
                raise ValidationError("tenant", f"{tenant!r} is not the scope's tenant {scope.tenant_id!r}")
            tenant_id, namespace, every = scope.tenant_id, scope.namespace, False
        at = _time.instant("now", self.clock() if now is None else now)
        rows = await self.store.read("triggers_due", tenant_id=tenant_id, namespace=namespace,
                                     all_namespaces=every, now=at, limit=positive_count("limit", limit))
        return [t for t in map(trigger_from_row, rows[0]["triggers"]) if t is not None]

    async def ack_trigger(self, scope: MemoryScope, trigger_id: str) -> str | None:
        """Acknowledge a trigger (by id, or the identifier of a pending one): never offered again.

        Acknowledging twice changes nothing; a cancelled trigger stays
        cancelled. For a recurring trigger, acknowledging an occurrence makes
        the next one (the first of its RRULE after both this one's due time
        and now, before ``expires_at``) and returns its id: exactly one, however
        many acknowledgements of the occurrence race. Otherwise returns None.

        Raises:
            NotFoundError: no such trigger visible to ``scope``.
            AuthorityError: the scope sees it but another scope owns it.
            ValidationError: an identifier naming several pending triggers.
        """
        ref = v.text("trigger_id", trigger_id)
        following = None
        rows = await self.store.read("trigger_lookup", **scope.params(), trigger_ref=ref)
        if len(rows) == 1 and rows[0]["owned"] and rows[0]["recurrence"] is not None:
            following = self._next(rows[0], scope)
        row = await self._lifecycle("trigger_ack", scope, ref, next=following)
        return None if row["next_id"] is None else str(row["next_id"])

    def _next(self, row: dict[str, Any], scope: MemoryScope) -> dict[str, Any] | None:
        """The next occurrence of a recurring trigger's row (``trigger_lookup``), or None when its rule ended.

        The first occurrence after both the acknowledged one's due time and now (missed ones are skipped),
        before ``expires_at``.
        """
        if row["due_at"] is None:
            return None
        due = _time.from_millis(row["due_at"])
        start = _time.from_millis(row["series_start"]) if row["series_start"] is not None else due
        now = _time.instant("clock()", self.clock())
        try:
            body = _recurrence.rule("recurrence", row["recurrence"], start)
            at = _recurrence.next_occurrence(body, start, after=max(due, now))
        except (ValidationError, ValueError, OverflowError) as exc:
            log.warning("trigger %s has a recurrence that cannot be evaluated (%s); acknowledged without a "
                        "next occurrence (`symfonic-graph doctor` reports it)", row["id"], exc)
            return None
        if at is None or (row["expires_at"] is not None and _time.epoch_millis(at) >= row["expires_at"]):
            return None
        return {"id": new_id(), "due_at": _time.epoch_millis(at), "tenant_token": tenant_token(scope.tenant_id)}

    async def claim_once(self, scope: MemoryScope, trigger_ids: Sequence[str]) -> set[str]:
        """Acknowledge the ``once`` triggers among ``trigger_ids`` that ``scope`` sees and are still pending.

        Returns the ids this call acknowledged: a turn offers a ``once`` trigger only when its id comes back,
        so when turns race for one, exactly one offers it. Ids of other triggers are ignored.
        """
        ids = [v.text("trigger_ids", i) for i in trigger_ids]
        if not ids:
            return set()
        written = await self.store.write([Step("triggers_claim_once", {**scope.params(), "ids": ids})])
        return {str(row["id"]) for row in written["triggers_claim_once"]}

    async def resolve_trigger(self, scope: MemoryScope, trigger_id: str) -> str | None:
        """Mark a trigger resolved: it is no longer pending (the same as :meth:`ack_trigger`)."""
        return await self.ack_trigger(scope, trigger_id)

    async def cancel_trigger(self, scope: MemoryScope, trigger_id: str) -> None:
        """Cancel a trigger (by id or identifier): never offered again, and a recurring one ends.

        Raises:
            NotFoundError, AuthorityError, ValidationError: as :meth:`ack_trigger`.
        """
        await self._lifecycle("trigger_cancel", scope, trigger_id)

    async def snooze_trigger(self, scope: MemoryScope, trigger_id: str, until: datetime | float | str) -> None:
        """Hold a pending trigger back until ``until`` (an aware datetime or epoch seconds), whatever its kind.

        Raises:
            ValidationError: ``until`` is not an instant, or the trigger is no longer pending.
            NotFoundError, AuthorityError: as :meth:`ack_trigger`.
        """
        at = _time.instant("until", until)
        row = await self._lifecycle("trigger_snooze", scope, trigger_id, until=at)
        if row["status"] != "pending":
            raise ValidationError("trigger_id", f"{trigger_id!r} is {row['resolution'] or 'resolved'}; only a "
                                  "pending trigger can be snoozed. Nothing changed.")

    async def _lifecycle(self, name: str, scope: MemoryScope, ref: str, **params: Any) -> dict[str, Any]:
        """Run one lifecycle statement on the trigger ``ref`` names; return its row."""
        args = {**scope.params(), "trigger_ref": v.text("trigger_id", ref), **params}
        written = await self.store.write([Step(name, args, one_trigger(scope, ref))])
        return written.one(name)


def one_trigger(scope: MemoryScope, ref: str) -> Check:
    """A step check for a lifecycle statement: exactly one trigger of the scope, else nothing changes."""
    owned = owned_by(scope, ref)

    def check(rows: list[dict[str, Any]]) -> None:
        if not rows:
            hint = ("an end user's trigger is found only with their namespace (--namespace), "
                    if scope.namespace is None else "")
            raise NotFoundError(f"no trigger with id or identifier {ref!r} visible in {describe_scope(scope)}; "
                                f"check the id and the scope ({hint}`symfonic-graph triggers list --tenant T "
                                "[--namespace N]` lists a scope's triggers with their ids)")
        owned([next((r for r in rows if r.get("owned")), rows[0])])
        if rows[0]["candidates"] > 1:
            ids = ", ".join(str(r["id"]) for r in rows if r.get("owned"))
            raise ValidationError("trigger_id", f"identifier {ref!r} names {rows[0]['candidates']} pending "
                                  f"triggers in {describe_scope(scope)} ({ids}); give the id. Nothing changed.")

    return check


def trigger_row(
    scope: MemoryScope,
    *,
    write_id: str | None = None,
    field_prefix: str = "",
    keyed_by_content: bool = False,
    now: float | None = None,
    **fields: object,
) -> dict[str, Any]:
    """One validated trigger row for ``triggers_write`` (errors name ``field_prefix`` + the field).

    ``fields`` are :class:`TriggerInput`'s (``condition``, ``task``, ``kind``,
    ``due_at``, ...); a ``due_in`` is resolved from ``now`` (epoch seconds,
    default the wall clock). With ``keyed_by_content``, a trigger without an
    identifier is keyed by the hash of its content, so writing it again
    replaces it (seed files).
    """
    trigger = TriggerInput.read(fields, field_prefix)
    return trigger_input_row(scope, trigger, write_id=write_id, keyed_by_content=keyed_by_content, now=now)


def trigger_input_row(
    scope: MemoryScope, trigger: TriggerInput, *, write_id: str | None = None, keyed_by_content: bool = False,
    now: float | None = None,
) -> dict[str, Any]:
    """The ``triggers_write`` row of a validated :class:`TriggerInput` (keys taken from the scope).

    A ``due_in`` becomes the row's ``due_at``: ``now`` (epoch seconds, default the wall clock) plus it.
    """
    content, ident = trigger.content(), trigger.identifier
    trigger_id = new_id()
    if keyed_by_content and ident is None:
        key = content_key("trigger", scope, content)
    else:
        key = trigger_key(scope, ident, trigger_id)
    key, base_key = staged_keys(key, write_id, stable=ident is not None or keyed_by_content)
    if trigger.due_in is not None:
        start = time.time() if now is None else now
        content["due_at"] = _time.epoch_millis(_time.instant("due_in", min(start + trigger.due_in, _time.MAX_EPOCH)))
    return {
        **content,
        "id": trigger_id,
        "key": key,
        "base_key": base_key,
        "identifier": ident,
        "tenant_id": scope.tenant_id,
        "tenant_token": tenant_token(scope.tenant_id),
        "namespace": scope.namespace,
        "write_id": write_id,
    }
