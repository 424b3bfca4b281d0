"""GraphMemoryStore: the one object every layer holds, assembled from the driver side's parts.

Every statement is a named query from ``cypher/``; values travel only as
parameters. A read is one auto-commit query (``session.run``, one round trip)
in a read-routed session; a write runs its steps in one managed transaction
(``execute_write``). Both are retried on transient errors within one
``query_timeout``, and every session shares one bookmark manager, so a write
is visible to the next read (``transport.py``). The rest is built on those
two calls: migrations (``schema.py``), retract, restore, prune and erase
(``markers.py``), staged writes and their publish (``staging.py``).
"""

from __future__ import annotations

from symfonic_graph._store.markers import Markers
from symfonic_graph._store.schema import Schema
from symfonic_graph._store.staging import Staging


class GraphMemoryStore(Staging, Markers, Schema):
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
