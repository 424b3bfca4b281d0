"""``Neo4jDecisionLog``: the shipped ``DecisionSink``, per-tenant ``:SymfonicDecision`` nodes written off the turn.

``record`` only queues (no round trip is added to a turn); a writer task per
event loop writes what is queued in batches of up to ``batch_size`` rows, one
transaction each. The queue is bounded (``max_queue``): a decision that finds
it full is dropped, counted (``dropped``) and logged. ``flush()`` waits until
every record handed over so far is written (or failed: a failed batch is
logged and counted in ``failed``). Decisions are erased with their scope
(``store.erase``) and pruned by age (``prune``; ``symfonic-graph decisions
prune --older-than 30d --tenant T``).

Example:
    >>> log = Neo4jDecisionLog(store)
    >>> agent = create_agent(model, tools, middleware=[MemoryMiddleware(memory, decision_sink=log)])  # doctest: +SKIP
    >>> await log.flush()  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, Final

from symfonic_graph._store.keys import positive_count
from symfonic_graph._store.store import GraphMemoryStore
from symfonic_graph.errors import ValidationError
from symfonic_graph.rules.decisions import DECISION_KINDS, Decision, DecisionSink
from symfonic_graph.shape import _validate as v

__all__ = ["Decision", "DecisionSink", "Neo4jDecisionLog", "decision_totals", "prune_decisions", "report_decisions"]

log = logging.getLogger("symfonic_graph.decisions")

MAX_QUEUE: Final = 10_000
BATCH_SIZE: Final = 500
PRUNE_BATCH: Final = 10_000


def _row(d: Decision) -> dict[str, Any]:
    return {"tenant_id": d.tenant_id, "namespace": d.namespace, "tool": d.tool, "call_id": d.call_id,
            "rule_ids": list(d.rule_ids), "decision": d.decision, "mode": d.mode, "reason": d.reason,
            "at": float(d.at), "conversation": d.conversation}


class Neo4jDecisionLog:
    """A ``DecisionSink`` writing each decision as a ``:SymfonicDecision`` node of its tenant, in batches.

    Attributes:
        dropped: decisions dropped because the queue was full.
        failed: decisions whose batch failed to write (logged at ERROR).
        written: decisions written.
    """

    def __init__(self, store: GraphMemoryStore, *, max_queue: int = MAX_QUEUE, batch_size: int = BATCH_SIZE) -> None:
        if store is None:
            raise ValueError("the decision log needs a graph store")
        self.store = store
        self.max_queue = positive_count("max_queue", max_queue, most=10_000_000)
        self.batch_size = positive_count("batch_size", batch_size, most=10_000)
        self.dropped = 0
        self.failed = 0
        self.written = 0
        self._queue: asyncio.Queue[dict[str, Any]] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._writer: asyncio.Task[None] | None = None

    def _ready(self) -> asyncio.Queue[dict[str, Any]]:
        loop = asyncio.get_running_loop()
        if self._queue is None or self._loop is not loop:  # a queue and writer per event loop
            self._queue, self._loop = asyncio.Queue(self.max_queue), loop
            self._writer = None
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_loop(self._queue), name="symfonic-decision-log")
        return self._queue

    async def record(self, decisions: Sequence[Decision]) -> None:
        """Queue ``decisions`` and return at once; a full queue drops (counted, logged at WARNING)."""
        queue = self._ready()
        for d in decisions:
            if not d.tenant_id:
                continue  # no scope, no tenant to keep it under: the log line is its record
            try:
                queue.put_nowait(_row(d))
            except asyncio.QueueFull:
                self.dropped += 1
                log.warning("decision log queue full (%d); dropped %s of tenant %s (tool %s, call %s); "
                            "%d dropped so far", self.max_queue, d.decision, d.tenant_id, d.tool, d.call_id,
                            self.dropped)

    async def flush(self) -> None:
        """Wait until every decision handed to ``record`` so far is written (or its batch failed)."""
        if self._queue is not None and self._loop is asyncio.get_running_loop():
            self._ready()
            await self._queue.join()

    async def _write_loop(self, queue: asyncio.Queue[dict[str, Any]]) -> None:
        while True:
            rows = [await queue.get()]
            while len(rows) < self.batch_size and not queue.empty():
                rows.append(queue.get_nowait())
            try:
                await self.store.write([("decisions_record", {"rows": rows})])
                self.written += len(rows)
            except Exception:
                self.failed += len(rows)
                log.error("decision log: %d decision(s) not written", len(rows), exc_info=True)
            finally:
                for _ in rows:
                    queue.task_done()

    async def aclose(self) -> None:
        """Write what is queued, then stop the writer task."""
        await self.flush()
        if self._writer is not None and self._loop is asyncio.get_running_loop():
            self._writer.cancel()
            await asyncio.gather(self._writer, return_exceptions=True)
        self._writer = None

    async def prune(self, tenant_id: str, *, older_than_seconds: float) -> int:
        """Delete the tenant's decisions older than ``older_than_seconds``; returns how many."""
        return await prune_decisions(self.store, tenant_id, older_than_seconds=older_than_seconds)


async def prune_decisions(store: GraphMemoryStore, tenant_id: str, *, older_than_seconds: float,
                          now: float | None = None) -> int:
    """Delete ``tenant_id``'s ``:SymfonicDecision`` nodes recorded more than ``older_than_seconds`` ago, in batches.

    Raises:
        ValidationError: the tenant is empty, or the age is no number of seconds from 0.
    """
    tenant = v.text("tenant_id", tenant_id)
    age = older_than_seconds
    if isinstance(age, bool) or not isinstance(age, (int, float)) or not age >= 0:
        raise ValidationError("older_than_seconds", "must be a number of seconds from 0")
    before = (time.time() if now is None else now) - float(age)
    total = 0
    while True:
        rows = (await store.write([("decisions_prune", {"tenant_id": tenant, "before": before,
                                                        "limit": PRUNE_BATCH})]))["decisions_prune"]
        pruned = int(rows[0]["pruned"]) if rows else 0
        total += pruned
        if pruned < PRUNE_BATCH:
            return total


async def report_decisions(store: GraphMemoryStore, tenant_id: str, *, namespace: str | None = None,
                           since_seconds: float | None = None, now: float | None = None) -> list[dict[str, Any]]:
    """Per rule of ``tenant_id``: its blocks, would-blocks, conversations (thread ids, else call ids) and examples."""
    tenant = v.text("tenant_id", tenant_id)
    since = 0.0 if since_seconds is None else (time.time() if now is None else now) - float(since_seconds)
    rows = await store.read("decisions_report", tenant_id=tenant, namespace=namespace, since=since)
    return [{"rule_id": r["rule_id"], "identifier": r["identifier"], "blocks": int(r["blocks"]),
             "would_blocks": int(r["would_blocks"]), "conversations": int(r["conversations"]),
             "examples": list(r["examples"])} for r in rows]


async def decision_totals(store: GraphMemoryStore, tenant_id: str, *, namespace: str | None = None,
                          since_seconds: float | None = None, now: float | None = None) -> dict[str, int]:
    """How many decisions of each kind ``tenant_id`` kept in the window, every kind named (0 when none).

    Refusals, pass-throughs and stale-rules decisions name no rule: these totals are where a report counts them.

    Example:
        >>> await decision_totals(store, "acme", since_seconds=7 * 86400)  # doctest: +SKIP
        {'block': 2, 'would_block': 1, 'refused': 1, 'pass_through': 1, 'stale_rules': 0}
    """
    tenant = v.text("tenant_id", tenant_id)
    since = 0.0 if since_seconds is None else (time.time() if now is None else now) - float(since_seconds)
    rows = await store.read("decisions_totals", tenant_id=tenant, namespace=namespace, since=since)
    counted = {str(r["decision"]): int(r["count"]) for r in rows}
    return {kind: counted.get(kind, 0) for kind in DECISION_KINDS}
