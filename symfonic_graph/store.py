"""GraphMemoryStore: the driver, transactions, markers and schema.

Every statement is a named query from ``cypher/``; values travel only as
parameters. Reads go through ``execute_read`` and writes through
``execute_write`` (retried on transient errors, routed on a cluster), all
sessions share one bookmark manager so a write is visible to the next read,
and each call is bounded by ``query_timeout``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction
from neo4j.exceptions import ClientError, DriverError, Neo4jError

from symfonic_graph import _validate as v
from symfonic_graph._cypher import Query, cypher_root, parse_queries, query
from symfonic_graph.errors import AuthorityError, NotFoundError, SchemaError, StoreUnavailableError, ValidationError
from symfonic_graph.scope import MemoryScope

log = logging.getLogger("symfonic_graph.store")

T = TypeVar("T")
Row = dict[str, Any]
Statement = tuple[str, dict[str, Any]]

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

_MIGRATION_FILE = re.compile(r"^(\d+)_([a-z0-9_]+)\.cypher$")
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
        if not 0 < query_timeout < PUBLISH_SETTLE_SECONDS:
            raise ValueError(f"query_timeout must be positive seconds, under {PUBLISH_SETTLE_SECONDS}")
        self.driver = driver
        self.database = database
        self.query_timeout = query_timeout
        self._bookmarks = AsyncGraphDatabase.bookmark_manager()

    @classmethod
    @asynccontextmanager
    async def connect(
        cls, uri: str, user: str, password: str, *, database: str | None = None, query_timeout: float = 10.0
    ) -> AsyncIterator[GraphMemoryStore]:
        """Open a driver, yield a store over it, and close the driver after.

        Example:
            >>> async with GraphMemoryStore.connect("bolt://127.0.0.1:7687", "neo4j", pw) as store:
            ...     await store.apply_schema()
        """
        driver = AsyncGraphDatabase.driver(uri, auth=(user, password))
        try:
            yield cls(driver, database=database, query_timeout=query_timeout)
        finally:
            await driver.close()

    # -- transactions -----------------------------------------------------

    async def _bounded(self, work: Callable[[], Awaitable[T]], what: str, *, writes: bool = False) -> T:
        maybe = (" The write may have committed: retrying it with the same identifier is safe "
                 "(it replaces, never duplicates).") if writes else ""
        try:
            with anyio.fail_after(self.query_timeout):
                return await work()
        except TimeoutError:
            raise StoreUnavailableError(
                f"{what}: Neo4j did not answer within {self.query_timeout}s; check the server, "
                f"or raise query_timeout.{maybe}"
            ) from None
        except ClientError:
            raise
        except (Neo4jError, DriverError, OSError) as exc:
            raise StoreUnavailableError(f"{what}: Neo4j is unavailable ({exc}); check the server.{maybe}") from exc

    def _session(self) -> neo4j.AsyncSession:
        return self.driver.session(
            database=self.database, bookmark_manager=self._bookmarks, notifications_min_severity="OFF"
        )

    async def read(self, name: str, **params: Any) -> list[Row]:
        """Run the named read query; return its rows as dicts."""
        q = query(name)
        q.check_args(params)

        async def tx(t: AsyncManagedTransaction) -> list[Row]:
            result = await t.run(q.text, params)
            return [record.data() async for record in result]

        async def work() -> list[Row]:
            async with self._session() as session:
                return await session.execute_read(neo4j.unit_of_work(timeout=self.query_timeout)(tx))

        return await self._bounded(work, f"query {name}")

    async def write(
        self, statements: Sequence[Statement], *, _check: Callable[[int, list[Row]], None] | None = None
    ) -> list[list[Row]]:
        """Run named write queries in one transaction (all or nothing).

        ``_check`` sees each statement's index and rows as they come and may
        raise to roll the whole transaction back.
        """
        prepared: list[tuple[Query, dict[str, Any]]] = []
        for name, params in statements:
            q = query(name)
            q.check_args(params)
            prepared.append((q, params))

        async def tx(t: AsyncManagedTransaction) -> list[list[Row]]:
            out = []
            for q, params in prepared:
                result = await t.run(q.text, params)
                out.append([record.data() async for record in result])
                if _check is not None:
                    _check(len(out) - 1, out[-1])
            return out

        async def work() -> list[list[Row]]:
            async with self._session() as session:
                return await session.execute_write(neo4j.unit_of_work(timeout=self.query_timeout)(tx))

        return await self._bounded(work, "write " + ", ".join(n for n, _ in statements), writes=True)

    # -- schema -----------------------------------------------------------

    async def apply_schema(self) -> list[int]:
        """Apply the versioned constraints and indexes; return versions newly applied.

        Idempotent: a second run applies nothing and returns ``[]``. Safe to
        run from several processes at once.
        """
        applied = {row["version"] for row in await self._schema_read("migrations_applied")}
        done: list[int] = []
        for version, name, statements in _migrations():
            if version in applied:
                continue
            for q in statements:
                await self._schema_statement(q)
            await self.write([("migration_record", {"version": version, "name": name})])
            done.append(version)
        return done

    async def _schema_read(self, name: str) -> list[Row]:
        try:
            return await self.read(name)
        except ClientError as exc:
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
            except ClientError as exc:
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

    async def retract(self, scope: MemoryScope, node_id: str, *, reason: str = "") -> None:
        """Hide a node from every read (soft delete); ``restore`` undoes it."""
        await self._marker("node_retract", scope, node_id, reason=v.text("reason", reason, required=False))
        log.info("retracted %s in tenant %s: %s", node_id, scope.tenant_id, reason)

    async def restore(self, scope: MemoryScope, node_id: str) -> None:
        """Undo ``retract``."""
        await self._marker("node_restore", scope, node_id)

    async def _marker(self, name: str, scope: MemoryScope, node_id: str, **extra: Any) -> list[Row]:
        v.text("node_id", node_id)
        params = {**scope.params(), "node_id": node_id, **extra}
        results = await self.write(
            [(name, params), ("catalog_bump", {"tenant_id": scope.tenant_id})], _check=owned_by(scope, node_id)
        )
        return results[0]

    async def prune(self, scope: MemoryScope, *, older_than_seconds: float) -> int:
        """Hard-delete this scope's own nodes (exactly its namespace) retracted more than ``older_than_seconds`` ago."""
        age = older_than_seconds
        if isinstance(age, bool) or not isinstance(age, (int, float)) or not 0 <= age <= MAX_AGE_SECONDS:
            raise ValidationError(
                "older_than_seconds", f"must be a number of seconds from 0 to {MAX_AGE_SECONDS} (100 years)"
            )
        rows = await self.write(
            [("retracted_prune", {**scope.params(), "older_than_seconds": older_than_seconds})]
        )
        return int(rows[0][0]["pruned"]) if rows[0] else 0

    async def publish(self, scope: MemoryScope, write_id: str) -> int:
        """Make every node staged under ``write_id`` visible, in one transaction; return how many.

        Visibility flips by one append to the tenant's catalog node, which
        readers read once per query, so a concurrent reader sees all of the
        write or none of it. Writes published more than ``PUBLISH_SETTLE_SECONDS``
        ago are folded first (their ``:SymfonicUnpublished`` label removed).
        """
        params = {**scope.params(), "write_id": _required_write_id(write_id)}
        await self.fold_published(scope)
        tenant = {"tenant_id": scope.tenant_id}
        results = await self.write(
            [
                ("catalog_lock", tenant),
                ("write_replace_live", params),
                ("write_publish", params),
                ("catalog_bump", tenant),
            ]
        )
        return int(results[2][0]["published"])

    async def fold_published(self, scope: MemoryScope, *, settle_seconds: float | None = None) -> int:
        """Remove ``:SymfonicUnpublished`` from writes published over ``settle_seconds`` ago.

        Two transactions, in this order: the labels go, then the catalog
        entries; neither changes what any reader shorter than the settle
        period sees. Returns how many nodes were folded.
        """
        settle = PUBLISH_SETTLE_SECONDS if settle_seconds is None else settle_seconds
        lock: Statement = ("catalog_lock", {"tenant_id": scope.tenant_id})
        [_, rows] = await self.write([lock, ("write_fold", {"tenant_id": scope.tenant_id, "settle_seconds": settle})])
        if not rows or not rows[0]["due"]:
            return 0
        await self.write([lock, ("write_unlist", {"tenant_id": scope.tenant_id, "entries": rows[0]["due"]})])
        return int(rows[0]["folded"])

    async def write_staged(
        self,
        scope: MemoryScope,
        write_id: str | None,
        statements: Sequence[Statement],
        *,
        check: Callable[[int, list[Row]], None] | None = None,
    ) -> list[list[Row]]:
        """Like ``write``, but refuse a ``write_id`` this scope already published (nothing is written).

        ``check`` sees the index (into ``statements``) and rows of each statement.
        """
        if write_id is None:
            return await self.write(statements, _check=check)

        def refuse_published(index: int, rows: list[Row]) -> None:
            if index == 1 and rows and rows[0]["published"]:
                raise ValidationError(
                    "write_id", f"{write_id!r} was already published in this scope; stage under a fresh write_id"
                )
            if index >= 2 and check is not None:
                check(index - 2, rows)

        lock: Statement = ("catalog_lock", {"tenant_id": scope.tenant_id})
        guard: Statement = ("write_id_published", {**scope.params(), "write_id": write_id})
        results = await self.write([lock, guard, *statements], _check=refuse_published)
        return results[2:]

    async def discard(self, scope: MemoryScope, write_id: str) -> int:
        """Delete every node staged under ``write_id`` in exactly this scope; return how many.

        Serialized with ``publish`` on the tenant's catalog lock: of a publish
        and a discard of the same write, exactly one takes effect.
        """
        params = {**scope.params(), "write_id": _required_write_id(write_id)}
        results = await self.write([("catalog_lock", {"tenant_id": scope.tenant_id}), ("write_discard", params)])
        return int(results[1][0]["discarded"]) if results[1] else 0

    async def catalog_version(self, scope: MemoryScope) -> int:
        """The tenant's catalog version: bumped by every library write to its skills."""
        rows = await self.read("catalog_version", tenant_id=scope.tenant_id)
        return int(rows[0]["version"]) if rows else 0


def positive_count(field: str, value: object, *, most: int = MAX_COUNT) -> int:
    """``value`` if it is an int from 1 to ``most``, else a ValidationError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValidationError(field, f"must be a whole number from 1 to {most}, got {value!r}")
    return value


def owned_by(scope: MemoryScope, node_id: str) -> Callable[[int, list[Row]], None]:
    """A ``write`` check for statement 0 returning ``owned`` rows: NotFound when none, Authority when not owned.

    Raising inside the transaction rolls it back, so nothing changes.
    """

    def check(index: int, rows: list[Row]) -> None:
        if index != 0:
            return
        if not rows:
            raise NotFoundError(
                f"no node {node_id!r} visible in tenant {scope.tenant_id!r} namespace {scope.namespace!r}; "
                "check the id and the scope"
            )
        row = rows[0]
        if not row.get("owned"):
            owner = MemoryScope(str(row["tenant_id"]), row.get("namespace"))
            raise AuthorityError(
                f"{node_id!r} belongs to {owner!r}"
                + (" (tenant-wide)" if owner.namespace is None else "")
                + f"; {scope!r} sees it but cannot change it: make this change in {owner!r}. Nothing changed."
            )

    return check


def refuse_held_keys(index: int, what: str) -> Callable[[int, list[Row]], None]:
    """A ``write`` check for a ``*_keys_held`` statement at ``index``: a key held by another scope aborts."""

    def check(at: int, rows: list[Row]) -> None:
        if at == index and rows:
            row = rows[0]
            raise AuthorityError(
                f"{what} {row['id']!r} of tenant {row['tenant_id']!r} namespace {row['namespace']!r} holds the key "
                f"this write would use ({row['key']}); a write never takes over another scope's node. "
                "Fix that node's symfonic_key (`symfonic-graph doctor` lists it). Nothing was written."
            )

    return check


def _required_write_id(write_id: object) -> str:
    checked = check_write_id(write_id)
    if checked is None:
        raise ValidationError("write_id", "must be a non-empty string")
    return checked


def _migrations() -> list[tuple[int, str, list[Query]]]:
    found = []
    for path in sorted((cypher_root() / "schema").glob("*.cypher")):
        match = _MIGRATION_FILE.match(path.name)
        if not match:
            raise SchemaError(f"{path}: migration files are named NNNN_name.cypher")
        queries = parse_queries(path.read_text(encoding="utf-8"), f"schema/{path.name}")
        found.append((int(match[1]), match[2], queries))
    return found


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
