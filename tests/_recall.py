"""What the recall tests share: deleting their tenants (``FORGET``, used by the ``forget`` fixture in
conftest.py), and asking the full-text index directly."""

from __future__ import annotations

import neo4j

from symfonic_graph.recall import RECALL_INDEX

# Deletes every node of the given tenants (each label through its tenant index).
FORGET = """
UNWIND $tenants AS t
CALL (t) {
  MATCH (n:Skill {tenant_id: t}) RETURN n
  UNION MATCH (n:Precondition {tenant_id: t}) RETURN n
  UNION MATCH (n:Trigger {tenant_id: t}) RETURN n
  UNION MATCH (n:Fact {tenant_id: t}) RETURN n
  UNION MATCH (n:SymfonicCatalog {tenant_id: t}) RETURN n
  UNION MATCH (n:SymfonicChange {tenant_id: t}) RETURN n
  UNION MATCH (n:SymfonicErasure {tenant_id: t}) RETURN n
}
DETACH DELETE n
"""
# What the full-text procedure itself yields for a Lucene query, before any Cypher filter.
YIELDED = f"CALL db.index.fulltext.queryNodes('{RECALL_INDEX}', $search) YIELD node RETURN node.tenant_id AS tenant"


async def yielded(driver: neo4j.AsyncDriver, search: str) -> list[str]:
    """The tenant ids of the nodes ``db.index.fulltext.queryNodes`` yields for ``search``."""
    records, _, _ = await driver.execute_query(YIELDED, {"search": search})
    return [r["tenant"] for r in records]


def word(tenant: str, stem: str = "okapi") -> str:
    """A search word no other test uses: one Lucene token, unique to this test."""
    return stem + tenant[-12:]
