"""Coalescing: turns that begin within a short window share one round trip.

A fleet serving many conversations calls ``TurnMemory.begin`` for many scopes
at nearly the same moment. Each call puts its scope in the current batch;
``window`` seconds after the first one (``0``: at the next turn of the event
loop), the batch goes to Neo4j as one ``turn_snapshot`` query over all its
scopes, and each caller gets its own row. Each scope is filtered by its own
tenant inside the query, and ``TurnMemory`` re-checks every row on the way out.

No scope's data or read time can cost another scope its read:

- the batch runs in a context of its own, never under one caller's deadline;
- each caller waits for the batch at most the window plus ``hedge`` seconds
  (a few times the recent batch time, from ``MIN_HEDGE`` to ``MAX_HEDGE``;
  ``MAX_HEDGE`` until a batch was timed), and never more than the window plus
  ``BATCH_SHARE`` of the time left to its deadline, then reads its own scope
  alone;
- when the batch fails for any reason, each caller reads its scope again on
  its own, so only the scope that fails raises;
- a caller that reads alone after waiting for a batch gets that wait back:
  its deadline moves later by the time it waited, so its own read has the
  whole budget it had when it asked, whatever ``query_timeout`` is. A
  neighbour whose catalog is huge, or whose read stalls or fails late, costs
  a turn at most that wait (``window + min(hedge, BATCH_SHARE * budget)``),
  never a timeout: a turn ends within its ``query_timeout`` plus that wait;
- a scope whose own read failed, or whose row shipped more than
  ``SOLO_CHARS`` characters, is read on its own, outside every batch, for the
  next ``SOLO_SECONDS``, so its neighbours do not wait for it again.

In a real outage every scope's own read fails too, each with its own
``StoreUnavailableError`` (``TurnMemory`` then enforces each scope's last
catalog within its ``outage_grace``).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from symfonic_graph._store.transport import _DEADLINE
from symfonic_graph.errors import StoreUnavailableError

Row = dict[str, Any]
ReadMany = Callable[[list[Mapping[str, Any]]], Awaitable[list[Row]]]

__all__ = ["BATCH_SHARE", "MAX_HEDGE", "MIN_HEDGE", "SOLO_CHARS", "SOLO_SECONDS", "Coalescer"]

SOLO_SECONDS = 60.0
"""How long a scope whose own read failed, or shipped a big row, is kept out of batches."""
SOLO_CHARS = 256 * 1024
"""Characters of text (``Row["shipped"]``) from which a scope's row is read outside every batch."""
MIN_HEDGE = 0.25
"""Seconds a caller waits for its batch at least before reading its scope alone."""
MAX_HEDGE = 1.0
"""Seconds a caller waits for its batch at most before reading its scope alone."""
BATCH_SHARE = 0.5
"""The share of the time left to a caller's deadline it may spend waiting for a batch (after the window)."""
_HEDGE_FACTOR = 4.0  # times the recent batch time a caller waits before reading alone


class _ReadAlone(Exception):
    """Set on a caller's future when its batch failed: the caller reads its scope on its own."""


class _Batch:
    __slots__ = ("entries", "sent", "task")

    def __init__(self, entries: list[tuple[Mapping[str, Any], asyncio.Future[Row]]]) -> None:
        self.entries = entries
        self.task: asyncio.Task[None] | None = None
        self.sent = False  # its query is on the wire

    def drop_if_abandoned(self, _: object = None) -> None:
        """Cancel the batch before its query is sent once every caller has stopped waiting.

        A query already sent runs to its end (bounded by the store's
        ``query_timeout``) and its rows are dropped: cancelling it mid-read
        breaks its connection, and the reconnections that follow slow every
        read after it. Under 32 concurrent turns that cascade cut throughput
        to 480 turns/s from 6,100 (``bench/turn_bench.py``).
        """
        if (self.task is not None and not self.sent and not self.task.done()
                and all(f.cancelled() for _, f in self.entries)):
            self.task.cancel()


class Coalescer:
    """Batch concurrent single-scope reads into one ``read_many`` call.

    Args:
        read_many: reads a list of scope parameter maps; returns one row per entry, in order
            (a row may carry ``shipped``: the characters of text it holds).
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
        self._batch_seconds: float | None = None  # a moving average of the recent batches' time
        self.queries = 0  # queries sent, batches and reads alone (for the benchmark and tests)
        self.hedged = 0  # callers that stopped waiting for a slow batch and read alone

    @property
    def hedge(self) -> float:
        """Seconds a caller now waits for its batch before reading its scope alone."""
        if self._batch_seconds is None:  # no batch timed yet (the server may still be planning the query)
            return MAX_HEDGE
        return min(MAX_HEDGE, max(MIN_HEDGE, _HEDGE_FACTOR * self._batch_seconds))

    async def read(self, scope_params: Mapping[str, Any]) -> Row:
        """This scope's row, read together with whatever other scopes arrive in the window.

        Runs in the caller's context: a read of the scope alone (after a
        failed or slow batch) is bounded by the caller's own deadline, moved
        later by the time it waited for the batch.
        """
        key = _key(scope_params)
        until = self._solo.get(key)
        if until is not None:
            if time.monotonic() < until:
                return await self._alone(scope_params)
            del self._solo[key]
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Row] = loop.create_future()
        self._batch.append((scope_params, future))
        if len(self._batch) >= self.max_batch:
            self._flush()
        elif self._timer is None:
            self._timer = (loop.call_later(0, self._flush) if self.window <= 0
                           else loop.call_later(self.window, self._flush))
        asked = time.monotonic()
        end = _DEADLINE.get()
        wait = self.hedge if end is None else min(self.hedge, BATCH_SHARE * (end - asked))
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.window + max(0.0, wait))
        except _ReadAlone:  # the batch failed (maybe late): read alone with the whole budget
            _give_back(asked)
            return await self._alone(scope_params)
        except TimeoutError:  # the batch is slow (a neighbour's data, or a stall): do not wait for it
            if future.done() and not future.cancelled() and future.exception() is None:
                return future.result()  # answered just now
            self.hedged += 1
            future.cancel()
            _give_back(asked)
            return await self._alone(scope_params)
        except asyncio.CancelledError:
            future.cancel()
            raise

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        entries, self._batch = self._batch, []
        if entries:
            batch = _Batch(entries)
            # A context of its own: the batch is never bounded by the deadline of the caller that opened it.
            task = asyncio.get_running_loop().create_task(self._send(batch), context=contextvars.Context())
            batch.task = task
            for _, future in entries:  # every caller gone (each read alone): the batch is not needed
                future.add_done_callback(batch.drop_if_abandoned)
            self._tasks.add(task)  # keep a reference until it is done
            task.add_done_callback(self._tasks.discard)

    async def _send(self, batch: _Batch) -> None:
        live = [(params, future) for params, future in batch.entries if not future.done()]
        if not live:
            return
        batch.sent = True
        self.queries += 1
        started = time.monotonic()
        try:
            rows = await self._read_many([params for params, _ in live])
        except asyncio.CancelledError:  # never leave a caller waiting
            for _, future in live:
                if not future.done():
                    future.set_exception(StoreUnavailableError("the coalesced turn read was cancelled"))
            raise
        except Exception as exc:
            if len(live) == 1:
                self._keep_alone(_key(live[0][0]))
                if not live[0][1].done():
                    live[0][1].set_exception(exc)
                return
            # One failing (or slow) scope fails alone: each caller reads its scope again, under its own deadline.
            for _, future in live:
                if not future.done():
                    future.set_exception(_ReadAlone())
            return
        took = time.monotonic() - started
        self._batch_seconds = took if self._batch_seconds is None else 0.8 * self._batch_seconds + 0.2 * took
        for (params, future), row in zip(live, rows, strict=True):
            if _big(row):
                self._keep_alone(_key(params))
            if not future.done():
                future.set_result(row)

    async def _alone(self, params: Mapping[str, Any]) -> Row:
        """A read of one scope outside every batch; it joins them again once it succeeds with a small row."""
        self.queries += 1
        try:
            [row] = await self._read_many([params])
        except Exception:
            self._keep_alone(_key(params))
            raise
        if _big(row):
            self._keep_alone(_key(params))
        else:
            self._solo.pop(_key(params), None)
        return row

    def _keep_alone(self, key: tuple[Any, Any]) -> None:
        self._solo[key] = time.monotonic() + SOLO_SECONDS
        if len(self._solo) > 4 * self.max_batch:  # forget the oldest
            self._solo.pop(next(iter(self._solo)))


def _give_back(asked: float) -> None:
    """Move the caller's deadline later by the time it waited since ``asked`` for a batch it did not get.

    Its own read then has the budget it had when it asked, as if it had read
    alone from the start. The caller's ``deadline()`` block restores the
    deadline it found when it ends.
    """
    end = _DEADLINE.get()
    if end is not None:
        _DEADLINE.set(end + (time.monotonic() - asked))


def _big(row: Row) -> bool:
    return int(row.get("shipped") or 0) > SOLO_CHARS


def _key(params: Mapping[str, Any]) -> tuple[Any, Any]:
    return params.get("tenant_id"), params.get("namespace")
