"""Coalescing: turns that begin within a short window share one round trip.

A fleet serving many conversations calls ``TurnMemory.begin`` for many scopes
at nearly the same moment. Each call puts its scope in the current batch;
``window`` seconds after the first one (``0``: at the next turn of the event
loop), the batch goes to Neo4j as one ``turn_snapshot`` query over all its
scopes, and each caller gets its own row. Each scope is filtered by its own
tenant inside the query, and ``TurnMemory`` re-checks every row on the way out.

One failing scope never fails the others: when the batch query fails for any
reason, a timeout included (one tenant's catalog too big to ship in time),
each scope is read again on its own, so only the scope that fails raises. A
scope that then fails alone is read on its own, outside every batch, for the
next ``SOLO_SECONDS``, so its neighbours do not wait for it again. In a real
outage every scope's own read fails too, each with its own
``StoreUnavailableError`` (``TurnMemory`` then enforces each scope's last
catalog within its ``outage_grace``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from symfonic_graph.errors import StoreUnavailableError

Row = dict[str, Any]
ReadMany = Callable[[list[Mapping[str, Any]]], Awaitable[list[Row]]]

__all__ = ["SOLO_SECONDS", "Coalescer"]

SOLO_SECONDS = 60.0
"""How long a scope whose own read failed is kept out of batches."""


class Coalescer:
    """Batch concurrent single-scope reads into one ``read_many`` call.

    Args:
        read_many: reads a list of scope parameter maps; returns one row per entry, in order.
        window: seconds to wait for more callers after the first of a batch (0: the same loop turn).
        max_batch: scopes per query at most; a full batch is sent at once.
    """

    def __init__(self, read_many: ReadMany, *, window: float, max_batch: int = 256) -> None:
        self._read_many = read_many
        self.window = window
        self.max_batch = max_batch
        self._batch: list[tuple[Mapping[str, Any], asyncio.Future[Row]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._solo: dict[tuple[Any, Any], float] = {}  # scope -> until when it is read alone
        self.queries = 0  # batch queries sent (for the benchmark and tests)

    async def read(self, scope_params: Mapping[str, Any]) -> Row:
        """This scope's row, read together with whatever other scopes arrive in the window."""
        key = _key(scope_params)
        until = self._solo.get(key)
        if until is not None:
            if time.monotonic() < until:
                [row] = await self._alone(scope_params)
                return row
            del self._solo[key]
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Row] = loop.create_future()
        self._batch.append((scope_params, future))
        if len(self._batch) >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = (loop.call_later(0, self._flush) if self.window <= 0
                           else loop.call_later(self.window, self._flush))
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._batch = self._batch, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._send(batch))
            self._tasks.add(task)  # keep a reference until it is done
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: list[tuple[Mapping[str, Any], asyncio.Future[Row]]]) -> None:
        live = [(params, future) for params, future in batch if not future.done()]
        if not live:
            return
        self.queries += 1
        try:
            rows = await self._read_many([params for params, _ in live])
        except asyncio.CancelledError:  # never leave a caller waiting
            for _, future in live:
                if not future.done():
                    future.set_exception(StoreUnavailableError("the coalesced turn read was cancelled"))
            raise
        except Exception as exc:
            if len(live) == 1:
                self._solo[_key(live[0][0])] = time.monotonic() + SOLO_SECONDS
                if len(self._solo) > 4 * self.max_batch:  # forget the oldest
                    self._solo.pop(next(iter(self._solo)))
                if not live[0][1].done():
                    live[0][1].set_exception(exc)
                return
            # One failing (or slow) scope fails alone: every scope is read again on its own.
            await asyncio.gather(*(self._send([entry]) for entry in live))
            return
        for (_, future), row in zip(live, rows, strict=True):
            if not future.done():
                future.set_result(row)

    async def _alone(self, params: Mapping[str, Any]) -> list[Row]:
        """A read of one scope kept out of batches; it joins them again once it succeeds."""
        try:
            rows = await self._read_many([params])
        except Exception:
            self._solo[_key(params)] = time.monotonic() + SOLO_SECONDS
            raise
        self._solo.pop(_key(params), None)
        return rows


def _key(params: Mapping[str, Any]) -> tuple[Any, Any]:
    return params.get("tenant_id"), params.get("namespace")
