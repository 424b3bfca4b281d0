"""Coalescing: turns that begin within a short window share one round trip.

A fleet serving many conversations calls ``TurnMemory.begin`` for many scopes
at nearly the same moment. Each call puts its scope in the current batch;
``window`` seconds after the first one (``0``: at the next turn of the event
loop), the batch goes to Neo4j as one ``turn_snapshot`` query over all its
scopes, and each caller gets its own row. Each scope is filtered by its own
tenant inside the query, and ``TurnMemory`` re-checks every row on the way out.

One failing scope never fails the others: when the batch query itself fails
for any reason but a store outage, each scope is read again on its own, so
only the scope that fails raises. A store outage fails every caller of the
batch with the same ``StoreUnavailableError``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from symfonic_graph.errors import StoreUnavailableError

Row = dict[str, Any]
ReadMany = Callable[[list[Mapping[str, Any]]], Awaitable[list[Row]]]

__all__ = ["Coalescer"]


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
        self.queries = 0  # batch queries sent (for the benchmark and tests)

    async def read(self, scope_params: Mapping[str, Any]) -> Row:
        """This scope's row, read together with whatever other scopes arrive in the window."""
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
            if len(live) == 1 or isinstance(exc, StoreUnavailableError):
                for _, future in live:
                    if not future.done():
                        future.set_exception(exc)
                return
            await asyncio.gather(*(self._send([entry]) for entry in live))  # one failing scope fails alone
            return
        for (_, future), row in zip(live, rows, strict=True):
            if not future.done():
                future.set_result(row)
