"""GraphMemoryStore: the driver, transactions, markers and schema.

Every statement is a named query from ``cypher/``; values travel only as
parameters. Reads go through ``execute_read`` and writes through
``execute_write`` (retried on transient errors, routed on a cluster), all
sessions share one bookmark manager so a write is visible to the next read,
and each call is bounded by ``query_timeout``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
import re
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar

import anyio
import neo4j
from neo4j import AsyncBoltDriver, AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, AsyncNeo4jDriver
from neo4j.exceptions import AuthError, ClientError, ConfigurationError, DriverError, Neo4jError

from symfonic_graph._cypher import Query, cypher_root, parse_queries, query
from symfonic_graph.errors import (
    AuthenticationError,
    AuthorityError,
    DatabaseNotFoundError,
    NotFoundError,
    QueryError,
    SchemaError,
    StoreUnavailableError,
    SymfonicGraphError,
    ValidationError,
)
from symfonic_graph.shape import _validate as v
from symfonic_graph.shape._limits import refuse_over_cap
from symfonic_graph.shape.scope import MemoryScope, describe_scope

log = logging.getLogger("symfonic_graph.store")

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S")
Row = dict[str, Any]
Statement = tuple[str, dict[str, Any]]
"""A named query and its parameters, run as a step without a check."""
Check = Callable[[list[Row]], None]
"""Sees the rows of its own step, inside the transaction; raising rolls the whole write back."""


@dataclass(frozen=True, slots=True)
class Step:
    """One statement of a write: the named query, its parameters, its own check, and its result's name.

    A write is a list of steps read back by name, never by position, so adding
    a step to a write touches one place.

    Example:
        >>> Step("skills_write", {"rows": []}).name, Step("catalog_lock", {}, key="lock:acme").name
        ('skills_write', 'lock:acme')
    """

    query: str
    params: Mapping[str, Any]
    check: Check | None = None
    key: str | None = None

    @property
    def name(self) -> str:
        """The name its rows come back under (``key``, else the query's name)."""
        return self.key or self.query


class Written:
    """The rows of each step of a write, by step name.

    Example:
        >>> Written([("skills_write", [{"ids": ["s1"]}])]).one("skills_write")["ids"]
        ['s1']
    """

    __slots__ = ("_rows",)

    def __init__(self, steps: Sequence[tuple[str, list[Row]]]) -> None:
        self._rows: dict[str, list[list[Row]]] = {}
        for name, rows in steps:
            self._rows.setdefault(name, []).append(rows)

    def __getitem__(self, name: str) -> list[Row]:
        found = self._rows.get(name)
        if found is None:
            raise KeyError(f"no step named {name!r} in this write")
        if len(found) > 1:
            raise KeyError(f"{len(found)} steps are named {name!r} in this write; give each a key")
        return found[0]

    def one(self, name: str) -> Row:
        """The first row of step ``name`` (a write step that returns one row)."""
        rows = self[name]
        if not rows:
            raise KeyError(f"step {name!r} returned no row")
        return rows[0]

    def __contains__(self, name: object) -> bool:
        return name in self._rows


def _step(item: Step | Statement) -> Step:
    return item if isinstance(item, Step) else Step(item[0], item[1])

# A published write keeps its :SymfonicUnpublished label (readers see it through
# the catalog's list of published writes) until it is this old; every read must
# finish faster, so removing the label later changes nothing a reader sees.
PUBLISH_SETTLE_SECONDS = 300.0
# Identifiers and write ids go into the uniquely indexed `symfonic_key`, whose
# index entries Neo4j caps at about 8 kB: bound them so the key always fits.
MAX_KEY_PART = 256
# The largest count a limit takes (Cypher integers are 64-bit).
MAX_COUNT = 2**62
# The largest age `prune` takes: beyond it a Cypher duration would overflow.
MAX_AGE_SECONDS = 100 * 365 * 24 * 3600
# Nodes `erase` deletes per transaction.
ERASE_BATCH = 1000
# Nodes a staged write's publish, fold or discard changes per transaction (and seed files write per batch).
STAGE_BATCH = 5000

_MIGRATION_FILE = re.compile(r"^(\d+)_([a-z0-9_]+)\.cypher$")
# A migration file whose comments before its first statement hold this line
# waits for ``apply_schema(after_rollout=True)``: it removes what processes of
# the previous release still use.
_AFTER_ROLLOUT = "// apply: after rollout"
# Errors a concurrent `CREATE ... IF NOT EXISTS` may raise while another
# process creates the same rule; the rule exists afterwards either way.
_SCHEMA_RACE_CODES = frozenset(
    {
        "Neo.ClientError.Schema.EquivalentSchemaRuleAlreadyExists",
        "Neo.ClientError.Schema.ConstraintAlreadyExists",
        "Neo.ClientError.Schema.IndexAlreadyExists",
        "Neo.ClientError.Schema.ConstraintWithNameAlreadyExists",
        "Neo.ClientError.Schema.IndexWithNameAlreadyExists",
    }
)

# A statement that reads a node another transaction deletes while it runs (a
# scan across tenants, such as stamp_keys or doctor, while an app deletes its
# own triggers) fails with this code, and its transaction rolls back whole. It
# is retried like a transient failure, at most this many times: a statement
# that keeps failing with it is reported as the QueryError it is.
_DELETED_UNDER_READ = "Neo.ClientError.Statement.EntityNotFound"
_DELETED_UNDER_READ_RETRIES = 10

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
    async def bounded(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        store: GraphMemoryStore = self if isinstance(self, GraphMemoryStore) else getattr(self, "store")  # noqa: B009
        with store.deadline():
            return await method(self, *args, **kwargs)

    return bounded


def new_id() -> str:
    """A fresh node id."""
    return str(uuid.uuid4())


def check_write_id(write_id: object) -> str | None:
    """Validate an optional staging ``write_id``."""
    if write_id is None:
        return None
    if not isinstance(write_id, str) or not write_id:
        raise ValidationError("write_id", "must be a non-empty string or None")
    v.encodable("write_id", write_id)
    if len(write_id) > MAX_KEY_PART:
        raise ValidationError("write_id", f"must be at most {MAX_KEY_PART} characters")
    return write_id


class GraphMemoryStore:
    """The shared Neo4j behind every memory layer.

    Args:
        driver: a caller-owned ``neo4j.AsyncDriver``.
        database: the database to use (the server default when None).
        query_timeout: seconds each call may take, retries included, before
            it fails with ``StoreUnavailableError``.

    Example:
        >>> driver = neo4j.AsyncGraphDatabase.driver(uri, auth=(user, password))
        >>> store = GraphMemoryStore(driver)
        >>> await store.apply_schema()
        >>> await store.retract(MemoryScope("acme"), skill.id, reason="outdated")
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
    ) -> AsyncIterator[GraphMemoryStore]:
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
            await store._bounded(driver.verify_connectivity, "connect")
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

    async def _bounded(self, work: Callable[[], Awaitable[T]], what: str, *, writes: bool = False) -> T:
        """Run ``work`` within ``query_timeout``; let only ``SymfonicGraphError`` out.

        ``_session`` turns the driver's retry loop off, so retries happen here:
        a transient failure (a lost connection, a deadlock, a leader switch) is
        retried with backoff until the timeout, and so is a read of a node that
        another transaction deleted meanwhile (up to ``_DELETED_UNDER_READ_RETRIES``
        times; the failed attempt rolled back whole), while a refused connection and
        every other failure are reported at once, typed: bad credentials
        (``AuthenticationError``), a query Neo4j refuses (``QueryError``, a
        ``ClientError`` too), a value the driver cannot send (``ValidationError``)
        and an unreachable or failing server (``StoreUnavailableError``). The
        driver's exception is the ``__cause__``.
        """
        maybe = (" The write may have committed: retrying it with the same identifier is safe "
                 "(it replaces, never duplicates).") if writes else ""
        last: Neo4jError | DriverError | None = None  # the last transient failure, retried

        def one_line(exc: object) -> str:
            return " ".join(str(exc).split()) or type(exc).__name__

        def refused(exc: BaseException, depth: int = 0) -> bool:
            # The driver wraps the socket's ConnectionRefusedError, and a routing
            # driver groups one failure per router: refused when all were refused.
            cause: BaseException | None = exc
            while cause is not None and depth < 20:
                if isinstance(cause, ConnectionRefusedError):
                    return True
                if isinstance(cause, BaseExceptionGroup):
                    return all(refused(sub, depth + 1) for sub in cause.exceptions)
                cause, depth = cause.__cause__ or cause.__context__, depth + 1
            return False

        def target() -> str:
            driver = self.driver
            if isinstance(driver, AsyncBoltDriver):
                scheme, address = "bolt", str(driver.address)
            elif isinstance(driver, AsyncNeo4jDriver) and driver.initial_addresses:
                scheme, address = "neo4j", str(driver.initial_addresses[0])
            else:
                return "Neo4j"
            return f"{scheme}{'+s' if driver.encrypted else ''}://{address}"

        def from_driver(exc: BaseException) -> bool:
            tb = exc.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            return tb is not None and str(tb.tb_frame.f_globals.get("__name__", "")).startswith("neo4j")

        def timed_out() -> StoreUnavailableError:
            seen = f" (last error: {one_line(last)})" if last is not None else ""
            return StoreUnavailableError(
                f"{what}: Neo4j did not answer within {self.query_timeout}s{seen}; check the server, "
                f"or raise query_timeout.{maybe}"
            )

        # The call's deadline (GraphMemoryStore.deadline) when one is running, else this round trip's own.
        end = _DEADLINE.get()
        budget = self.query_timeout if end is None else min(self.query_timeout, end - time.monotonic())
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
        except ClientError as exc:
            code, message = exc.code, exc.message or str(exc)
            if code.startswith("Neo.ClientError.Transaction.TransactionTimedOut"):
                raise timed_out() from exc
            if code == "Neo.ClientError.Database.DatabaseNotFound":
                raise DatabaseNotFoundError(self.database, target(), message) from exc
            if isinstance(exc, AuthError) or (
                code.startswith("Neo.ClientError.Security.") and code != "Neo.ClientError.Security.Forbidden"
            ):
                if "missing key `credentials`" in message:
                    why = "no password was given"
                elif code == "Neo.ClientError.Security.Unauthorized":
                    why = "wrong user name or password"
                else:
                    why = "the credentials were refused"
                raise AuthenticationError(
                    f"{target()} rejected the login: {why} ({one_line(message)}). Check NEO4J_USER and "
                    "NEO4J_PASSWORD (or the credentials given to the driver); for the local server, "
                    "`symfonic-graph server start` prints them"
                ) from exc
            raise QueryError(what, code, message, hint="Nothing was written." if writes else "") from exc
        except TimeoutError:
            raise timed_out() from last
        except (Neo4jError, DriverError, OSError) as exc:
            if refused(exc):
                raise StoreUnavailableError(
                    f"cannot connect to {target()}: connection refused; is Neo4j running? "
                    f"Start it, or check the server address.{maybe if last is not None else ''}"
                ) from exc
            if isinstance(exc, Neo4jError):
                raise StoreUnavailableError(
                    f"{what}: Neo4j failed ({exc.code}: {one_line(exc.message or exc)}); check the server.{maybe}"
                ) from exc
            raise StoreUnavailableError(f"{what}: Neo4j is unavailable ({one_line(exc)}); check the server.{maybe}"
                                        ) from exc
        except (UnicodeError, OverflowError, ValueError, TypeError) as exc:
            # Raised while the driver packs a parameter: an unencodable string
            # (a lone surrogate), an integer beyond 64 bits, an unsupported type.
            if not isinstance(exc, (UnicodeError, OverflowError)) and not from_driver(exc):
                raise  # not the driver's: a bug, shown as it is
            raise ValidationError(
                what, f"a value cannot be sent to Neo4j ({one_line(exc)}).{' Nothing was written.' if writes else ''}"
            ) from exc

    def _session(self, access_mode: str = neo4j.WRITE_ACCESS) -> neo4j.AsyncSession:
        # max_transaction_retry_time=0: the driver tries a managed transaction
        # once; `_bounded` retries, so that a refused connection fails at once
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
        ``_bounded`` retries transient failures.
        """
        q = query(name)
        q.check_args(params)
        statement = neo4j.Query(q.text, timeout=self.query_timeout)

        async def work() -> list[Row]:
            async with self._session(access_mode=neo4j.READ_ACCESS) as session:
                result = await session.run(statement, params)
                return [_row(record) async for record in result]

        return await self._bounded(work, f"query {name}")

    async def write(self, steps: Sequence[Step | Statement]) -> Written:
        """Run named write queries in one transaction (all or nothing); their rows by step name.

        Each step's ``check`` sees that step's rows as they come and may raise
        to roll the whole transaction back. A write that bumps or locks a
        tenant's catalog takes that lock first (``catalog_first``).
        """
        ordered = catalog_first([_step(s) for s in steps])
        prepared: list[tuple[Query, Step]] = []
        for step in ordered:
            q = query(step.query)
            q.check_args(dict(step.params))
            prepared.append((q, step))

        async def tx(t: AsyncManagedTransaction) -> list[tuple[str, list[Row]]]:
            out = []
            for q, step in prepared:
                result = await t.run(q.text, dict(step.params))
                rows = [_row(record) async for record in result]
                if step.check is not None:
                    step.check(rows)
                out.append((step.name, rows))
            return out

        async def work() -> list[tuple[str, list[Row]]]:
            async with self._session() as session:
                return await session.execute_write(neo4j.unit_of_work(timeout=self.query_timeout)(tx))

        done = await self._bounded(work, "write " + ", ".join(s.query for s in ordered), writes=True)
        return Written(done)

    # -- schema -----------------------------------------------------------

    async def apply_schema(self, *, after_rollout: bool = False) -> list[int]:
        """Apply the versioned constraints and indexes; return versions newly applied.

        A migration that removes what processes of the previous release still
        use (today 0008, which drops the full-text index ``symfonic_memory_text_v2``)
        waits until ``after_rollout=True`` says that every process using the
        database runs this release (``symfonic-graph schema apply --after-rollout``);
        ``waiting_migrations`` lists them. On a database without any migration
        yet there is nothing to roll out from: every migration is applied.
        Then ``stamp_keys`` gives nodes seeded with plain Cypher (or by an
        older release) the keys the library maintains. Idempotent: a second run applies nothing and returns ``[]``.
        Safe to run from several processes at once.

        Example:
            >>> await store.apply_schema()  # before the rollout: 0008 waits
            [1, 2, 3, 4, 5, 6, 7]
            >>> await store.apply_schema(after_rollout=True)  # no process of the previous release is left
            [8]
        """
        applied = {row["version"] for row in await self._schema_read("migrations_applied")}
        # A database without any migration has no previous release to roll out from: apply everything.
        after_rollout = after_rollout or not applied
        done: list[int] = []
        for migration in _migrations():
            if migration.version in applied or (migration.after_rollout and not after_rollout):
                continue
            for q in migration.statements:
                await self._schema_statement(q)
            await self.write([("migration_record", {"version": migration.version, "name": migration.name})])
            done.append(migration.version)
        await self.stamp_keys()
        return done

    async def waiting_migrations(self) -> list[int]:
        """Versions that wait for ``apply_schema(after_rollout=True)``.

        Example:
            >>> await store.waiting_migrations()  # 0008 drops an index processes of the previous release use
            [8]
        """
        applied = {row["version"] for row in await self._schema_read("migrations_applied")}
        if not applied:  # a fresh database: `schema apply` applies every migration at once
            return []
        return [m.version for m in _migrations() if m.after_rollout and m.version not in applied]

    async def stamp_keys(self, *, batch: int = 5000) -> int:
        """Give nodes seeded with plain Cypher the keys the library keeps; return how many changed.

        Every trigger gets its scope key ``symfonic_scope`` (label
        ``:SymfonicScoped``), and every skill, trigger and fact its tenant
        token ``symfonic_tenant_token`` (label ``:SymfonicTokened``); a stale
        one (a plain-Cypher ``SET n.namespace`` or ``SET n.tenant_id``) is
        replaced. Until then those nodes are still read, only through the
        slower tenant-wide fallback. Idempotent, in transactions of ``batch``
        nodes; ``apply_schema`` (``symfonic-graph schema apply``) runs it.

        Example:
            >>> await store.stamp_keys()  # after seeding triggers with plain Cypher
            3
        """
        total = 0

        async def drain(name: str, **params: Any) -> None:
            nonlocal total
            while True:
                stamped = int((await self.write([(name, {**params, "batch": batch})])).one(name)["stamped"])
                total += stamped
                if stamped < batch:
                    return

        await drain("stamp_trigger_scopes")
        tokens = []
        for group in await self.read("stamp_tenant_groups"):
            token = tenant_token(group["tenant_id"])
            if group["untokened"] or group["tokens"] != [token]:
                tokens.append({"tenant_id": group["tenant_id"], "token": token})
        for start in range(0, len(tokens), 1000):
            await drain("stamp_tenant_tokens", tokens=tokens[start:start + 1000])
        await drain("stamp_untenanted_tokens")
        return total

    async def _schema_read(self, name: str) -> list[Row]:
        try:
            return await self.read(name)
        except (ClientError, QueryError) as exc:
            raise SchemaError(f"cannot read applied migrations: {exc.message}") from exc

    async def _schema_statement(self, q: Query) -> None:
        async def work() -> None:
            async with self._session() as session:
                result = await session.run(q.text)
                await result.consume()

        for attempt in range(3):
            try:
                await self._bounded(work, f"schema statement {q.name}")
                return
            except (ClientError, QueryError) as exc:
                if exc.code in _SCHEMA_RACE_CODES:
                    return
                raise SchemaError(f"{q.source}: {q.name} failed: {exc.message}") from exc
            except StoreUnavailableError:
                if attempt == 2:
                    raise

    async def server_info(self) -> Row:
        """Name, version and edition of the Neo4j server."""
        rows = await self.read("server_components")
        return rows[0]

    # -- markers ----------------------------------------------------------

    async def retract(self, scope: MemoryScope, node_id: str, *, reason: str = "") -> str:
        """Hide a node from every read (soft delete); ``restore`` undoes it. Returns the node's id.

        ``node_id`` is the node's id or, when no node of the tenant has that
        id, the ``identifier`` of a live skill or trigger of the scope.

        Raises:
            NotFoundError: the scope sees no such node.
            AuthorityError: the node belongs to another scope (e.g. tenant-wide, seen from a namespace).
            ValidationError: the identifier names several nodes of the scope; give the node id.
        """
        node = await self._marker("node_retract", scope, node_id,
                                  reason=v.text("reason", reason, required=False))
        log.info("retracted %s in %s: %s", node, describe_scope(scope), reason)
        return node

    async def restore(self, scope: MemoryScope, node_id: str) -> str:
        """Undo ``retract``; ``node_id`` as for ``retract``. Returns the node's id.

        Raises, besides what ``retract`` raises:
            ValidationError: the restored node would take the scope over its
                skill cap or its budget (``_limits``); nothing changes.
        """
        return await self._marker("node_restore", scope, node_id,
                                  cap=Step("skills_owned_count", scope.params(), refuse_over_cap(scope)))

    async def _marker(self, name: str, scope: MemoryScope, node_id: str, *, cap: Step | None = None,
                      **extra: Any) -> str:
        v.text("node_id", node_id)
        params = {**scope.params(), "node_id": node_id, **extra}
        written = await self.write(
            [Step(name, params, _one_target(scope, node_id)), *([cap] if cap is not None else []),
             ("catalog_bump", {"tenant_id": scope.tenant_id})]
        )
        return str(written.one(name)["id"])

    async def erase(self, scope: MemoryScope, *, batch_size: int = ERASE_BATCH) -> dict[str, int]:
        """Delete every node of ``scope`` for good, in batches; return how many per label.

        ``MemoryScope(tenant, namespace)`` erases exactly that namespace (one
        end user's memory): its skills with their preconditions, triggers,
        facts and trigger-selection audit nodes; tenant-wide nodes and other
        namespaces are never touched. ``MemoryScope(tenant)`` erases the whole
        tenant (offboarding): every namespace, the tenant-wide nodes, and its
        catalog node last. Each batch of at most ``batch_size`` nodes is its own
        transaction, so a tenant of any size never needs one large
        transaction; an interrupted erase is finished by running it again.

        Example:
            >>> await store.erase(MemoryScope("acme", "user-7"))
            {'Skill': 2, 'Precondition': 3, 'Trigger': 1, 'Fact': 0, 'SymfonicTriggerSelection': 0}
        """
        size = positive_count("batch_size", batch_size, most=100_000)
        whole = scope.namespace is None
        params = {**scope.params(), "whole_tenant": whole, "limit": size}
        counts = {"Skill": 0, "Precondition": 0, "Trigger": 0, "Fact": 0, "SymfonicTriggerSelection": 0}
        while True:
            rows = (await self.write([("erase_skills_batch", params)]))["erase_skills_batch"]
            skills = int(rows[0]["skills"]) if rows else 0
            if skills == 0:
                break
            counts["Skill"] += skills
            counts["Precondition"] += int(rows[0]["preconditions"] or 0)
        while True:
            rows = (await self.write([("erase_nodes_batch", params)]))["erase_nodes_batch"]
            if not rows:
                break
            for row in rows:
                counts[str(row["label"])] += int(row["nodes"])
        tenant = {"tenant_id": scope.tenant_id}
        if whole:
            rows = (await self.write([("catalog_lock", tenant), ("erase_catalog", tenant)]))["erase_catalog"]
            counts["SymfonicCatalog"] = int(rows[0]["catalogs"]) if rows else 0
        elif counts["Skill"]:
            await self.write([("catalog_bump", tenant)])  # cached catalogs of the tenant are read again
        log.info("erased %s: %s", describe_scope(scope) if not whole else f"tenant {scope.tenant_id} (whole)", counts)
        return counts

    async def prune(self, scope: MemoryScope, *, older_than_seconds: float) -> int:
        """Hard-delete this scope's own nodes (exactly its namespace) retracted more than ``older_than_seconds`` ago."""
        age = older_than_seconds
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not 0 <= age <= MAX_AGE_SECONDS:
            raise ValidationError(
                "older_than_seconds", f"must be a number of seconds from 0 to {MAX_AGE_SECONDS} (100 years)"
            )
        # The catalog lock first: a restore or a re-seed of a skill holds it until it commits, so the prune
        # reads their result and never deletes what they brought back (retracted_prune re-checks triggers).
        written = await self.write(
            [("catalog_lock", {"tenant_id": scope.tenant_id}),
             ("retracted_prune", {**scope.params(), "older_than_seconds": older_than_seconds})]
        )
        rows = written["retracted_prune"]
        return int(rows[0]["pruned"]) if rows else 0

    async def publish(self, scope: MemoryScope, write_id: str, *, batch_size: int = STAGE_BATCH) -> int:
        """Make every node staged under ``write_id`` visible at once; return how many.

        Visibility flips by one append to the tenant's catalog node, which
        readers read once per query, so a concurrent reader sees all of the
        write or none of it. The flip transaction writes only the catalog
        node: a large write is first prepared in transactions of at most
        ``batch_size`` nodes (each within ``query_timeout``), none of which
        changes what a reader sees. Writes published more than
        ``PUBLISH_SETTLE_SECONDS`` ago are folded first.

        Example:
            >>> await store.publish(MemoryScope("acme"), "release-42")
            120
        """
        return await self.publish_scopes([scope], write_id, batch_size=batch_size)

    async def publish_scopes(
        self, scopes: Sequence[MemoryScope], write_id: str, *, batch_size: int = STAGE_BATCH
    ) -> int:
        """``publish`` for several scopes (of one or more tenants) in one flip: all become visible together.

        A seed file of several scopes staged under one write id is published
        by this one call, so readers of every scope see the old file or the new
        one. Returns how many nodes became visible.
        """
        wid = _required_write_id(write_id)
        size = positive_count("batch_size", batch_size, most=100_000)
        scopes = list(dict.fromkeys(scopes))
        with self.deadline():  # a small write: every round trip within one query_timeout
            for tenant in dict.fromkeys(s.tenant_id for s in scopes):
                # One batch of folding per publish keeps it short; the rest waits for the next one.
                await self.fold_published(MemoryScope(tenant), batch_size=size, max_batches=1)
            try:
                return await self._flip(scopes, wid, size)  # prepared and listed in one transaction
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
        return await self._flip(scopes, wid, size)

    async def _flip(self, scopes: Sequence[MemoryScope], write_id: str, size: int) -> int:
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
        params = {**scope.params(), "write_id": _required_write_id(write_id), "limit": size}
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

    async def catalog_version(self, scope: MemoryScope) -> int:
        """The tenant's catalog version: bumped by every library write to its skills."""
        rows = await self.read("catalog_version", tenant_id=scope.tenant_id)
        return int(rows[0]["version"]) if rows else 0


# Statements that lock a tenant's catalog node: run first in a write, in tenant order (see catalog_first).
_CATALOG_STATEMENTS = frozenset({"catalog_lock", "catalog_bump"})


def catalog_first(steps: Sequence[Step]) -> list[Step]:
    """The one lock order of every write: catalogs first (in tenant id order), then skills and triggers.

    A write that locks or bumps a tenant's catalog node (every write that
    changes a tenant's skills, and publish, discard, fold and prune) takes
    each such catalog's lock before any other statement runs, so two writes
    never hold a skill and wait for a catalog the other holds: publish, a live
    re-seed, retract, restore, approve, fold, prune and discard serialize on
    the catalog instead of deadlocking. Returns the steps to run: the lock
    steps put in front are named ``catalog_first:<tenant>``.

    Example:
        >>> [s.name for s in catalog_first([Step("skills_write", {}), Step("catalog_bump", {"tenant_id": "acme"})])]
        ['catalog_first:acme', 'skills_write', 'catalog_bump']
    """
    tenants = sorted({str(s.params["tenant_id"]) for s in steps if s.query in _CATALOG_STATEMENTS})
    if not tenants:
        return list(steps)
    head = [Step("catalog_lock", {"tenant_id": t}, key=f"catalog_first:{t}") for t in tenants]
    leading = [(s.query, s.params.get("tenant_id")) for s in steps[: len(head)]]
    if leading == [(s.query, s.params["tenant_id"]) for s in head]:
        return list(steps)
    return [*head, *steps]


def _row(record: neo4j.Record) -> Row:
    """A record as a plain dict, as the driver decoded it.

    Every query returns maps, lists and scalars (projections, never graph
    entities), so the driver's ``Record.data()``, which walks every nested
    value to convert nodes, is not needed: on a cold turn it cost more than
    the round trip itself.
    """
    return dict(zip(record.keys(), record, strict=True))


def positive_count(field: str, value: object, *, most: int = MAX_COUNT) -> int:
    """``value`` if it is an int from 1 to ``most``, else a ValidationError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValidationError(field, f"must be a whole number from 1 to {most}, got {value!r}")
    return value


def owned_by(scope: MemoryScope, node_id: str) -> Check:
    """A step check for a statement returning ``owned`` rows: NotFound when none, Authority when not owned.

    Raising inside the transaction rolls it back, so nothing changes.
    """

    def check(rows: list[Row]) -> None:
        if not rows:
            raise NotFoundError(f"no node {node_id!r} visible in {describe_scope(scope)}; check the id and the scope")
        row = rows[0]
        if not row.get("owned"):
            raise AuthorityError(_not_owned(scope, node_id, row))

    return check


def _not_owned(scope: MemoryScope, node_id: str, row: Row) -> str:
    owner = describe_scope(MemoryScope(str(row["tenant_id"]), row.get("namespace")))
    return (f"{node_id!r} belongs to {owner}; {describe_scope(scope)} sees it but cannot change it: "
            f"make this change in {owner}. Nothing changed.")


def _one_target(scope: MemoryScope, node_id: str) -> Check:
    """``owned_by`` for the marker statements, whose ``node_id`` may be an identifier naming several nodes."""

    def check(rows: list[Row]) -> None:
        if not rows:
            raise NotFoundError(f"no node with id or identifier {node_id!r} visible in {describe_scope(scope)}; "
                                "check the id and the scope (`symfonic-graph skills list` shows both)")
        owned = [r for r in rows if r.get("owned")]
        if not owned:
            raise AuthorityError(_not_owned(scope, node_id, rows[0]))
        if len(owned) > 1:
            ids = ", ".join(str(r["id"]) for r in owned)
            raise ValidationError("node_id", f"identifier {node_id!r} names {len(owned)} nodes in "
                                  f"{describe_scope(scope)} ({ids}); give the node id instead. Nothing changed.")

    return check


def held_keys(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Every key a write may come to hold: its own, and the base key a staged write or draft takes later."""
    return [k for r in rows for k in (r["key"], r.get("base_key")) if k is not None]


def refuse_held_keys(what: str) -> Check:
    """A step check for a ``*_keys_held`` statement: a key held by another scope aborts the write."""

    def check(rows: list[Row]) -> None:
        if rows:
            row = rows[0]
            raise AuthorityError(
                f"{what} {row['id']!r} of tenant {row['tenant_id']!r} namespace {row['namespace']!r} holds the key "
                f"this write would use ({row['key']}); a write never takes over another scope's node. "
                "Fix that node's symfonic_key (`symfonic-graph doctor` lists it). Nothing was written."
            )

    return check


def refuse_published(write_id: str, scope: MemoryScope) -> Check:
    """A step check for ``write_id_published``: a write id this scope already published aborts the write."""

    def check(rows: list[Row]) -> None:
        if rows and rows[0]["published"]:
            raise ValidationError(
                "write_id", f"{write_id!r} was already published in {describe_scope(scope)}; "
                "stage under a fresh write_id"
            )

    return check


class _MoreToPrepare(Exception):
    """Raised inside a publish's flip when the write is too large for one transaction: it is rolled back."""


def _required_write_id(write_id: object) -> str:
    checked = check_write_id(write_id)
    if checked is None:
        raise ValidationError("write_id", "must be a non-empty string")
    return checked


@dataclass(frozen=True)
class Migration:
    """One file of ``cypher/schema``: its version, name and statements.

    ``after_rollout`` migrations only remove what processes of the previous
    release still use; ``apply_schema`` applies them when asked to.
    """

    version: int
    name: str
    statements: list[Query]
    after_rollout: bool


def _apply_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip().startswith("// apply:")]


def _migrations() -> list[Migration]:
    found = []
    for path in sorted((cypher_root() / "schema").glob("*.cypher")):
        match = _MIGRATION_FILE.match(path.name)
        if not match:
            raise SchemaError(f"{path}: migration files are named NNNN_name.cypher")
        text = path.read_text(encoding="utf-8")
        preamble, _, rest = text.partition("// name:")
        apply_lines = _apply_lines(preamble)
        if _apply_lines(rest):
            raise SchemaError(f"{path}: an '// apply:' line belongs before the first '// name:' header, "
                              "where it applies to the whole migration")
        if apply_lines not in ([], [_AFTER_ROLLOUT]):
            raise SchemaError(
                f"{path}: {' / '.join(apply_lines)!r} is not a known '// apply:' line; the only one is "
                f"{_AFTER_ROLLOUT!r} (the migration then waits for `schema apply --after-rollout`)")
        queries = parse_queries(text, f"schema/{path.name}")
        found.append(Migration(int(match[1]), match[2], queries, after_rollout=bool(apply_lines)))
    return found


def tenant_token(tenant_id: str) -> str:
    """The exact tenant token recall searches: ``t`` + the SHA-256 hex digest of the id.

    One alphanumeric word, so the full-text analyzer keeps it whole and a
    ``+symfonic_tenant_token:<token>`` clause matches this tenant only
    (``acme`` never matches ``acme-eu``, and ``---`` is a token like any other).

    Example:
        >>> tenant_token("acme")[:9], len(tenant_token("acme"))
        ('t822b33ad', 65)
    """
    return "t" + hashlib.sha256(tenant_id.encode("utf-8", "surrogatepass")).hexdigest()


def skill_key(scope: MemoryScope, identifier: str | None, fallback_id: str) -> str:
    """The unique key of a skill: (tenant, namespace, identifier), or its id."""
    if identifier is None:
        return json.dumps(["id", fallback_id], ensure_ascii=False)
    return json.dumps(["skill", scope.tenant_id, scope.namespace, identifier], ensure_ascii=False)


def trigger_key(scope: MemoryScope, identifier: str | None, fallback_id: str) -> str:
    """The unique key of a trigger: (tenant, namespace, identifier), or its id."""
    if identifier is None:
        return json.dumps(["trigger-id", fallback_id], ensure_ascii=False)
    return json.dumps(["trigger", scope.tenant_id, scope.namespace, identifier], ensure_ascii=False)


def content_key(kind: str, scope: MemoryScope, content: dict[str, Any]) -> str:
    """A stable key for an entry without an identifier: the hash of its validated content (seed files)."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]
    return json.dumps([f"{kind}-content", scope.tenant_id, scope.namespace, digest], ensure_ascii=False)


def staged_keys(key: str, write_id: str | None, *, stable: bool) -> tuple[str, str | None]:
    """``(key, base_key)`` of a write: a staged write of a stable key (an identifier, or content)
    waits beside the live node under a suffixed key until publish hands it the base key."""
    if write_id is not None and stable:
        return key + "\u0000staged:" + write_id, key
    return key, None
