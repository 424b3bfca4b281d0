"""Schema migrations: the versioned files of ``cypher/schema``, applied once each, and the keys they stamp.

A migration file is ``NNNN_name.cypher``; one whose comments before its first
statement hold ``// apply: after rollout`` waits for
``apply_schema(after_rollout=True)`` (it removes what processes of the
previous release still use).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from neo4j.exceptions import ClientError

from symfonic_graph._store.cypher import Query, cypher_root, parse_queries
from symfonic_graph._store.keys import tenant_token
from symfonic_graph._store.steps import Row
from symfonic_graph._store.transport import Transport
from symfonic_graph.errors import QueryError, SchemaError, StoreUnavailableError

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


def migrations() -> list[Migration]:
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


class Schema(Transport):
    """Applying the migrations, and stamping the keys plain-Cypher seeding leaves out."""

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
        for migration in migrations():
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
            >>> await store.waitingmigrations()  # 0008 drops an index processes of the previous release use
            [8]
        """
        applied = {row["version"] for row in await self._schema_read("migrations_applied")}
        if not applied:  # a fresh database: `schema apply` applies every migration at once
            return []
        return [m.version for m in migrations() if m.after_rollout and m.version not in applied]

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
                await self._within_timeout(work, f"schema statement {q.name}")
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
