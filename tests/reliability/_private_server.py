"""The private Neo4j the fault tests share (see ``conftest.private_neo4j``)."""

from __future__ import annotations

from dataclasses import dataclass

from symfonic_graph.server import LocalNeo4j


@dataclass
class PrivateNeo4j:
    """A Neo4j of the fault tests alone: they stop, restart and freeze it (the shared test server, never)."""

    server: LocalNeo4j
    port: int
    first_start: float  # seconds its first start took on this machine
    fresh: bool = True  # nothing has used it yet: its database is empty

    def claim_fresh(self) -> bool:
        """True once, for the first test that needs the database as the start left it."""
        fresh, self.fresh = self.fresh, False
        return fresh
