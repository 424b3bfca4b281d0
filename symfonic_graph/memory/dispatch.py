"""TriggerDispatcher: deliver due reminders without a user turn, each occurrence once.

A time trigger that became due waits for the user's next turn unless
something pushes it (a notification, an e-mail). The dispatcher is that
something: every ``interval`` seconds it lists each tenant's due time
triggers (:meth:`ProspectiveLayer.due`), *claims* them in Neo4j, hands each
claimed one to the application's ``deliver`` callback and records the
delivery. A claim is one guarded write per trigger (its lock first, then the
check), so of several dispatchers over one database -- processes, or store
objects on separate drivers -- exactly one wins a given occurrence.

Example:
    >>> async def push(trigger: Trigger) -> None:
    ...     await notify(trigger.namespace, trigger.task)
    >>> dispatcher = TriggerDispatcher(store, push, tenants=["acme"], interval=30)
    >>> task = asyncio.create_task(dispatcher.run())   # or: await dispatcher.run_once()
"""

from __future__ import annotations

import inspect
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import anyio

from symfonic_graph._store import GraphMemoryStore, positive_count
from symfonic_graph.errors import ValidationError
from symfonic_graph.memory.layers.prospective import ProspectiveLayer
from symfonic_graph.shape import _time
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape.models import Trigger
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["Deliver", "TriggerDispatcher"]

log = logging.getLogger("symfonic_graph.dispatch")

Deliver = Callable[[Trigger], "Awaitable[object] | object"]
"""The application's delivery: called with one due trigger; raising means "not delivered"."""


class TriggerDispatcher:
    """An async loop handing each due time-trigger occurrence to ``deliver`` exactly once.

    Args:
        store: the graph.
        deliver: ``(trigger) -> None`` or a coroutine function; the trigger's
            ``tenant_id`` and ``namespace`` say whose it is. Raising releases
            the claim: the occurrence is handed out again on a later round.
        tenants: the tenants served; ``None``: every tenant holding triggers
            (read from the tenant index each round).
        interval: seconds between rounds of :meth:`run`.
        lease: seconds a claim holds; a dispatcher that dies mid-delivery
            leaves its claim, which another takes over after this long (that
            occurrence may then be delivered twice).
        batch: triggers claimed per tenant per round.
        acknowledge: acknowledge each delivered trigger (a recurring one
            then makes its next occurrence); by default it stays pending and
            is still offered in the user's turns until the app acknowledges it.
        clock: epoch seconds (tests pass a fake).

    A delivered occurrence is never handed out again; a snooze, or setting
    the trigger again with a new due time, makes a new occurrence.
    """

    def __init__(
        self,
        store: GraphMemoryStore,
        deliver: Deliver,
        *,
        tenants: Iterable[str] | None = None,
        interval: float = 30.0,
        lease: float = 300.0,
        batch: int = 100,
        acknowledge: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not callable(deliver):
            raise ValidationError("deliver", f"must be a (trigger) -> None callable, got {type(deliver).__name__}")
        self.tenants = None if tenants is None else [v.text("tenants", t) for t in tenants]
        self.interval = _time.seconds("interval", interval)
        self.lease = _time.seconds("lease", lease)
        if self.lease <= 0:
            raise ValidationError("lease", "must be more than 0 seconds")
        self.batch = positive_count("batch", batch)
        self.store, self.deliver, self.acknowledge, self.clock = store, deliver, acknowledge, clock
        self.layer = ProspectiveLayer(store, clock=clock)
        self.token = uuid.uuid4().hex
        """This dispatcher's claim token (one per object)."""

    async def run(self) -> None:
        """Deliver rounds every ``interval`` seconds until cancelled; a failing round is logged and retried."""
        while True:
            try:
                await self.run_once()
            except Exception:
                log.exception("trigger dispatch round failed; retrying in %.0f s", self.interval)
            await anyio.sleep(self.interval)

    async def run_once(self) -> list[Trigger]:
        """One round over every tenant served: claim the due occurrences, deliver them; those delivered."""
        tenants = self.tenants
        if tenants is None:
            rows = await self.store.read("trigger_tenants")
            tenants = list(rows[0]["tenant_ids"])
        delivered: list[Trigger] = []
        for tenant in tenants:
            delivered += await self._tenant_round(tenant)
        return delivered

    async def claim(self, tenant: str, *, now: datetime | float | None = None,
                    limit: int | None = None) -> list[Trigger]:
        """Claim the tenant's due, undelivered time triggers for this dispatcher; the ones it won.

        Call :meth:`delivered` or :meth:`release` for each (cron-style use
        does, through ``symfonic-graph triggers due --claim``).
        """
        at = _time.instant("now", self.clock() if now is None else now)
        due = await self.layer.due(tenant=tenant, now=at, limit=self.batch if limit is None else limit)
        if not due:
            return []
        rows = await self.store.write_once("triggers_claim", tenant_id=tenant, ids=[t.id for t in due],
                                           token=self.token, now=at, until=at + timedelta(seconds=self.lease))
        won = {str(r["id"]) for r in rows if r["claimed"]}
        return [t for t in due if t.id in won]

    async def delivered(self, tenant: str, ids: list[str]) -> list[str]:
        """Record claimed triggers as delivered (never handed out again); the ids recorded."""
        rows = await self.store.write_once("triggers_delivered", tenant_id=tenant, ids=list(ids), token=self.token)
        return [str(r["id"]) for r in rows]

    async def release(self, tenant: str, ids: list[str]) -> list[str]:
        """Give claimed triggers back (deliverable again on the next round); the ids released."""
        rows = await self.store.write_once("triggers_release", tenant_id=tenant, ids=list(ids), token=self.token)
        return [str(r["id"]) for r in rows]

    async def _tenant_round(self, tenant: str) -> list[Trigger]:
        done: list[Trigger] = []
        for trigger in await self.claim(tenant):
            try:
                result: Any = self.deliver(trigger)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("delivering trigger %s of tenant %s failed; released for a later round",
                              trigger.id, tenant)
                await self.release(tenant, [trigger.id])
                continue
            await self.delivered(tenant, [trigger.id])
            done.append(trigger)
            if self.acknowledge:
                await self.layer.ack_trigger(MemoryScope(tenant, trigger.namespace), trigger.id)
        return done
