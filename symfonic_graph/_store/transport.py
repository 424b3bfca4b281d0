"""The driver side of the store: one connection, auto-commit reads, write transactions, one deadline.

A read is one auto-commit query (``session.run``: one Bolt round trip) in a
read-routed session; a write is one managed transaction (``execute_write``)
running every step in order. Every session shares one bookmark manager, so a
write is visible to the next read. The driver's own retries are off: each
call is bounded by ``query_timeout`` here, transient failures are retried
with backoff until then, and every other failure leaves as the typed error
``failures.FAILURES`` maps it to.
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import anyio
import neo4j
from neo4j import AsyncBoltDriver, AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, AsyncNeo4jDriver
from neo4j.exceptions import ConfigurationError, DriverError, Neo4jError

from symfonic_graph._store.cypher import Query, query
from symfonic_graph._store.failures import Attempt, refused, typed_failure
from symfonic_graph._store.packed import refresh_packed
from symfonic_graph._store.steps import (
    PACKING_STATEMENTS,
    Row,
    Statement,
    Step,
    Written,
    as_step,
    catalog_first,
    row_of,
)
from symfonic_graph.errors import StoreUnavailableError, SymfonicGraphError, ValidationError

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S")

# A published write keeps its :SymfonicUnpublished label (readers see it through
# the catalog's list of published writes) until it is this old; every read must
# finish faster, so removing the label later changes nothing a reader sees.
PUBLISH_SETTLE_SECONDS = 300.0

# A statement that reads a node another transaction deletes while it runs (a
# scan across tenants, such as stamp_keys or doctor, while an app deletes its
# own triggers) fails with this code, and its transaction rolls back whole. It
# is retried like a transient failure, at most this many times: a statement
# that keeps failing with it is reported as the QueryError it is.
_DELETED_UNDER_READ = "Neo.ClientError.Statement.EntityNotFound"
_DELETED_UNDER_READ_RETRIES = 10

log = logging.getLogger("symfonic_graph.store")

# The monotonic time by which the current public call must end (see GraphMemoryStore.deadline).
_DEADLINE: ContextVar[float | None] = ContextVar("symfonic_graph_deadline", default=None)


def within_deadline(
    method: Callable[Concatenate[S, P], Coroutine[Any, Any, T]],
) -> Callable[Concatenate[S, P], Coroutine[Any, Any, T]]:
    """Make an async method of the store (or of an object with a ``store``) one call with one deadline.

    Every store round trip the method makes, retries included, shares one
    ``query_timeout``: a call of three round trips against a slow server
    fails at its deadline instead of after three timeouts.

    Example:
        >>> class Layer:
        ...     @within_deadline
        ...     async def seed(self, scope): ...  # a write, then a read back
    """

    @functools.wraps(method)
    async def one_deadline(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        store: Transport = self if isinstance(self, Transport) else getattr(self, "store")  # noqa: B009
        with store.deadline():
            return await method(self, *args, **kwargs)

    return one_deadline


class Transport:
    """A driver, a database and a ``query_timeout``: ``read``, ``write`` and ``deadline``.

    ``GraphMemoryStore`` is this and the schema, marker and staging operations
    built on it (see ``store.py``).
    """

    def __init__(self, driver: AsyncDriver, *, database: str | None = None, query_timeout: float = 10.0) -> None:
        if isinstance(query_timeout, bool) or not isinstance(query_timeout, (int, float)) or not (
            0 < query_timeout < PUBLISH_SETTLE_SECONDS
        ):
            raise ValidationError("query_timeout", f"must be positive seconds, under {PUBLISH_SETTLE_SECONDS}")
        self.driver = driver
        self.database = database
        self.query_timeout = query_timeout
        self._bookmarks = AsyncGraphDatabase.bookmark_manager()

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, uri: str, user: str, password: str, *, database: str | None = None, query_timeout: float = 10.0
    ) -> AsyncIterator[Self]:
        """Open a driver, check that it can log in, yield a store over it, and close the driver after.

        Raises:
            AuthenticationError: Neo4j rejected ``user`` and ``password``.
            StoreUnavailableError: nothing answers at ``uri`` (a refused connection is reported at once).
            ValidationError: ``uri`` is not a Neo4j URI.

        Example:
            >>> async with GraphMemoryStore.connect("bolt://127.0.0.1:7687", "neo4j", pw) as store:
            ...     await store.apply_schema()
        """
        try:
            driver = AsyncGraphDatabase.driver(uri, auth=(user, password))
        except (ValueError, ConfigurationError, ImportError) as exc:
            raise ValidationError(
                "uri", f"cannot open {uri!r} ({' '.join(str(exc).split())}); use e.g. bolt://127.0.0.1:7687"
            ) from exc
        try:
            store = cls(driver, database=database, query_timeout=query_timeout)
            await store._within_timeout(driver.verify_connectivity, "connect")
            yield store
        finally:
            await driver.close()

    # -- transactions -----------------------------------------------------

    @contextmanager
    def deadline(self) -> Iterator[None]:
        """Give every store call made inside one ``query_timeout`` in total, retries included.

        Nested use keeps the outer deadline: a public call made of other
        public calls still ends within its own ``query_timeout``.

        Example:
            >>> with store.deadline():
            ...     await store.write(...)  # these two round trips share one query_timeout
            ...     await store.read(...)
        """
        if _DEADLINE.get() is not None:
            yield
            return
        token = _DEADLINE.set(time.monotonic() + self.query_timeout)
        try:
            yield
        finally:
            _DEADLINE.reset(token)

    async def _within_timeout(
        self, work: Callable[[], Awaitable[T]], what: str, *, writes: bool = False, timeout: float | None = None,
    ) -> T:
        """Run ``work`` within ``query_timeout``; let only ``SymfonicGraphError`` out.

        ``_session`` turns the driver's retry loop off, so retries happen here:
        a transient failure (a lost connection, a deadlock, a leader switch) is
        retried with backoff until the timeout, and so is a read of a node that
        another transaction deleted meanwhile (up to ``_DELETED_UNDER_READ_RETRIES``
        times; the failed attempt rolled back whole), while a refused connection and
        every other failure are reported at once, typed by ``failures.FAILURES``: bad credentials
        (``AuthenticationError``), a query Neo4j refuses (``QueryError``, a
        ``ClientError`` too), a value the driver cannot send (``ValidationError``)
        and an unreachable or failing server (``StoreUnavailableError``). The
        driver's exception is the ``__cause__``. ``timeout`` replaces
        ``query_timeout`` (``plan`` only).
        """
        last: Neo4jError | DriverError | None = None  # the last transient failure, retried
        limit = self.query_timeout if timeout is None else timeout

        # The call's deadline (GraphMemoryStore.deadline) when one is running, else this round trip's own.
        end = _DEADLINE.get()
        budget = limit if end is None else min(limit, end - time.monotonic())
        try:
            if budget <= 0:
                raise TimeoutError
            with anyio.fail_after(budget):
                delay, raced = 0.05, 0
                while True:
                    try:
                        return await work()
                    except (Neo4jError, DriverError) as exc:
                        if refused(exc):
                            raise
                        if not exc.is_retryable():
                            deleted_under_read = isinstance(exc, Neo4jError) and exc.code == _DELETED_UNDER_READ
                            if not deleted_under_read or raced >= _DELETED_UNDER_READ_RETRIES:
                                raise
                            raced += 1
                        last = exc
                    await anyio.sleep(delay * random.uniform(0.8, 1.2))
                    delay = min(delay * 2, 1.0)
        except SymfonicGraphError:
            raise
        except Exception as exc:
            attempt = Attempt(what, writes=writes, timeout=limit, target=self._target(),
                              database=self.database, last=last)
            typed = typed_failure(exc, attempt)
            if typed is None:
                raise  # not the driver's: a bug, shown as it is
            error, cause = typed
            raise error from cause

    def _target(self) -> str:
        """The server as a URI, for messages (``bolt://127.0.0.1:7687``), or ``Neo4j``."""
        driver = self.driver
        if isinstance(driver, AsyncBoltDriver):
            scheme, address = "bolt", str(driver.address)
        elif isinstance(driver, AsyncNeo4jDriver) and driver.initial_addresses:
            scheme, address = "neo4j", str(driver.initial_addresses[0])
        else:
            return "Neo4j"
        return f"{scheme}{'+s' if driver.encrypted else ''}://{address}"

    def _session(self, access_mode: str = neo4j.WRITE_ACCESS) -> neo4j.AsyncSession:
        # max_transaction_retry_time=0: the driver tries a managed transaction
        # once; `_within_timeout` retries, so that a refused connection fails at once
        # instead of being retried (and logged) until the timeout.
        return self.driver.session(
            database=self.database, bookmark_manager=self._bookmarks, notifications_min_severity="OFF",
            max_transaction_retry_time=0.0, default_access_mode=access_mode,
        )

    async def read(self, name: str, **params: Any) -> list[Row]:
        """Run the named read query; return its rows as dicts.

        A read is one auto-commit query (one Bolt round trip: a managed
        transaction would add a ``COMMIT``), routed to a reader, and causally
        after every write of this store through the shared bookmark manager.
        Each read query is a single statement, so it is atomic on its own;
        ``_within_timeout`` retries transient failures. A query declared
        ``// mode: write`` is refused (``TypeError``): run it with ``write``.
        """
        q = query(name)
        q.check_args(params)
        q.check_read()
        statement = neo4j.Query(q.text, timeout=self.query_timeout)

        async def work() -> list[Row]:
            async with self._session(access_mode=neo4j.READ_ACCESS) as session:
                result = await session.run(statement, params)
                return [row_of(record) async for record in result]

        return await self._within_timeout(work, f"query {name}")

    async def plan(self, name: str, params: Mapping[str, Any], *, timeout: float) -> None:
        """Run the named read once, its rows discarded, so that Neo4j plans it and keeps the plan.

        Neo4j keeps a plan per query text and kind of parameters until it
        restarts; ``params`` must be shaped as the real calls' are. Bounded by
        ``timeout`` instead of ``query_timeout``: planning a big query on a
        loaded server may take longer than a turn may wait.
        """
        q = query(name)
        q.check_args(params)
        q.check_read()
        statement = neo4j.Query(q.text, timeout=timeout)

        async def work() -> None:
            async with self._session(access_mode=neo4j.READ_ACCESS) as session:
                await (await session.run(statement, dict(params))).consume()

        await self._within_timeout(work, f"planning query {name}", timeout=timeout)

    async def write_once(self, name: str, **params: Any) -> list[Row]:
        """Run one named write query as an auto-commit query (one Bolt round trip); its rows.

        For a single statement whose own atomicity is enough (a limit's
        reservation). A transient failure is retried: the statement must be
        safe to run twice, or fail closed when it is.
        """
        q = query(name)
        q.check_args(params)
        statement = neo4j.Query(q.text, timeout=self.query_timeout)

        async def work() -> list[Row]:
            async with self._session() as session:
                result = await session.run(statement, params)
                return [row_of(record) async for record in result]

        return await self._within_timeout(work, f"query {name}", writes=True)

    async def write(self, steps: Sequence[Step | Statement]) -> Written:
        """Run named write queries in one transaction (all or nothing); their rows by step name.

        Each step's ``check`` sees that step's rows as they come and may raise
        to roll the whole transaction back. A write that bumps or locks a
        tenant's catalog takes that lock first (``catalog_first``).
        """
        ordered = catalog_first([as_step(s) for s in steps])
        prepared: list[tuple[Query, Step]] = []
        for step in ordered:
            q = query(step.query)
            q.check_args(dict(step.params))
            prepared.append((q, step))

        catalogs = sorted({str(s.params["tenant_id"]) for s in ordered if s.query in PACKING_STATEMENTS})

        async def tx(t: AsyncManagedTransaction) -> list[tuple[str, list[Row]]]:
            out = []
            for q, step in prepared:
                result = await t.run(q.text, dict(step.params))
                rows = [row_of(record) async for record in result]
                if step.check is not None:
                    step.check(rows)
                out.append((step.name, rows))
            return out

        async def work() -> list[tuple[str, list[Row]]]:
            async with self._session() as session:
                return await session.execute_write(neo4j.unit_of_work(timeout=self.query_timeout)(tx))

        done = await self._within_timeout(work, "write " + ", ".join(s.query for s in ordered), writes=True)
        if catalogs:
            await self._pack(catalogs)
        return Written(done)

    async def _pack(self, tenants: list[str]) -> None:
        """After a write that bumped these catalogs (or folded): pack their tenant-wide rows (``refresh_packed``).

        A transaction of its own, after the write committed, so that the rows
        are read as every later reader reads them (a transaction's own
        changes list a node's properties in another order). A failure costs
        only speed: the turns of those tenants then read the rows themselves
        (logged at WARNING), and the write stands.
        """
        async def work() -> None:
            async with self._session() as session:
                await session.execute_write(neo4j.unit_of_work(timeout=self.query_timeout)(refresh_packed), tenants)

        try:
            await self._within_timeout(work, "pack the catalog of " + ", ".join(tenants), writes=True)
        except StoreUnavailableError as exc:
            log.warning("%s; their turns read the skill rows themselves until the next write", exc)
