"""Limits counted in the store: one reservation per allowed call, atomic across processes.

A ``limit`` rule with ``per: namespace`` (an end user) or ``per: tenant`` is
counted in Neo4j, not in one conversation: when the gate allows a call of its
action, :class:`LimitLedger` reserves a slot on the rule's ``:SymfonicLimit``
node for the scope (one auto-commit query, which takes the node's write lock
before counting), and refuses the call when the window is full. A call whose
result failed releases its slot. A turn whose calls meet no such rule costs
no round trip.

Example:
    >>> ledger = LimitLedger(store)  # doctest: +SKIP
    >>> decisions = await ledger.reserve(scope, decisions)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Final

from symfonic_graph.errors import StoreUnavailableError
from symfonic_graph.rules.gate import GateDecision
from symfonic_graph.shape.scope import MemoryScope

__all__ = ["LimitLedger", "uncounted"]

log = logging.getLogger("symfonic_graph.gate")

_KEPT: Final = 10_000  # calls whose reservations a ledger remembers, to release them when their result fails


class LimitLedger:
    """Reserves store-counted limit slots for the calls the gate allowed; releases a failed call's slots."""

    def __init__(self, store: Any, wall_clock: Callable[[], float] = time.time) -> None:
        self.store = store
        self.wall_clock = wall_clock
        self._held: OrderedDict[tuple[MemoryScope, str], list[str]] = OrderedDict()

    @staticmethod
    def key(scope: MemoryScope, per: str, rule: str) -> str:
        """The counter's key: the tenant, the namespace (``per: namespace``) or ``*`` (``per: tenant``), the rule."""
        where = "*" if per == "tenant" else (scope.namespace or "")
        return "\x1f".join((scope.tenant_id, where, rule))

    async def reserve(self, scope: MemoryScope | None, decisions: Sequence[GateDecision]) -> tuple[GateDecision, ...]:
        """``decisions`` with each allowed call's store-counted limits reserved; a full window blocks the call.

        Without a scope (the lookup found none) a store-counted limit cannot be counted: its call is blocked.
        """
        if not any(d.allowed and _counted(d) for d in decisions):
            return tuple(decisions)
        if scope is None:
            return uncounted(decisions)
        return tuple([await self._one(scope, d) if d.allowed and _counted(d) else d for d in decisions])

    async def _one(self, scope: MemoryScope, decision: GateDecision) -> GateDecision:
        call_id = decision.call_id or f"call-{uuid.uuid4().hex}"
        taken: list[str] = []
        try:
            return await self._reserve(scope, decision, call_id, taken)
        except StoreUnavailableError as exc:  # a limit that cannot be counted never lets its call run
            log.warning("limit of %s for %s not reserved (%s); the call is refused", decision.tool_name, scope, exc)
            await self._free(taken, call_id)
            return dataclasses.replace(decision, verdict="store_unavailable", blocking=None)

    async def _reserve(self, scope: MemoryScope, decision: GateDecision, call_id: str,
                       taken: list[str]) -> GateDecision:
        now = self.wall_clock()
        for check in decision.matched:
            if check.shadow:
                continue
            for rule, entry, amount in check.counted:
                key = self.key(scope, entry.per, rule)
                seconds = entry.seconds
                [row] = await self.store.write_once(
                    "limit_reserve", key=key, tenant_id=scope.tenant_id,
                    namespace=scope.namespace if entry.per == "namespace" else None, now=now,
                    since=now - seconds if seconds is not None else float("-inf"), max_calls=entry.max_calls,
                    max_sum=entry.max_sum, amount=amount, call_id=call_id)
                if row["allowed"]:
                    taken.append(key)
                    continue
                await self._free(taken, call_id)  # all or nothing: a refused call holds no slot
                message = entry.message or (
                    f"`{decision.tool_name}` may run at most {entry.max_calls} time(s) per {entry.per}"
                    + (f" in {entry.window}" if entry.window else "") if entry.max_calls is not None else
                    f"the sum of `{entry.sum}` would pass {entry.max_sum:g} per {entry.per}")
                refused = dataclasses.replace(check, refused=(*check.refused, message))
                return dataclasses.replace(decision, verdict="blocked", blocking=refused)
        if taken:
            self._held[(scope, call_id)] = taken
            while len(self._held) > _KEPT:
                self._held.popitem(last=False)
        return decision

    async def release(self, scope: MemoryScope | None, call_id: str | None) -> None:
        """Free the slots ``call_id`` reserved (its result failed); nothing when it reserved none."""
        if scope is None or call_id is None:
            return
        await self._free(self._held.pop((scope, call_id), []), call_id)

    async def _free(self, keys: list[str], call_id: str) -> None:
        """Release ``call_id``'s slots; during an outage they stay counted (logged): never one run too many."""
        for key in keys:
            try:
                await self.store.write_once("limit_release", key=key, call_id=call_id)
            except StoreUnavailableError as exc:
                log.warning("a slot of %s could not be released (%s); it counts until its window ends", key, exc)


def uncounted(decisions: Sequence[GateDecision]) -> tuple[GateDecision, ...]:
    """``decisions`` where no store can count a limit (a lookup that is no ``TurnMemory``): such calls are blocked.

    A ``per: namespace`` or ``per: tenant`` limit never silently becomes a count of one conversation.
    """
    out = []
    for decision in decisions:
        check = next((c for c in decision.matched if c.counted and not c.shadow), None)
        if not decision.allowed or check is None:
            out.append(decision)
            continue
        why = (f"a limit per {check.counted[0][1].per} is counted in the store, and this gate has no store to "
               "count it in (wire it with memory=TurnMemory(store))")
        log.warning("rule %r (id=%s): %s", check.label, check.skill_id, why)
        out.append(dataclasses.replace(decision, verdict="blocked",
                                       blocking=dataclasses.replace(check, errors=(*check.errors, why))))
    return tuple(out)


def _counted(decision: GateDecision) -> bool:
    return any(check.counted and not check.shadow for check in decision.matched)
