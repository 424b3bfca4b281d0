// fragment: marker_target
// params: tenant_id, namespace, node_id
// The node a marker statement acts on, as rows (n, owned, candidates). First
// the tenant's skill, trigger or fact whose id is $node_id (ids are unique per
// tenant); only when there is none, the tenant's live skills and triggers
// whose identifier is $node_id (neither staged and unpublished, nor replaced).
// Only nodes the scope sees (tenant-wide, or of its namespace); `owned` when
// the node is exactly of the scope (write authority); `candidates` counts the
// owned matches: the statement changes a node only when there is exactly one,
// so an identifier that names two nodes (a live skill and its draft) changes
// nothing and the caller names them.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
CALL () {
  MATCH (n:Skill {tenant_id: $tenant_id, id: $node_id}) RETURN n, 0 AS rank
  UNION
  MATCH (n:Trigger {tenant_id: $tenant_id, id: $node_id}) RETURN n, 0 AS rank
  UNION
  MATCH (n:Fact {tenant_id: $tenant_id, id: $node_id}) RETURN n, 0 AS rank
  UNION
  MATCH (n:Skill {tenant_id: $tenant_id, identifier: $node_id}) RETURN n, 1 AS rank
  UNION
  MATCH (n:Trigger {tenant_id: $tenant_id, identifier: $node_id}) RETURN n, 1 AS rank
}
WITH n, rank, published
WHERE (n.namespace IS NULL OR n.namespace = $namespace)
  AND (rank = 0 OR
       // include: published_version(n)
      )
WITH n, rank,
     // include: node_owned(n)
     AS owned
ORDER BY rank, n.id
WITH collect({n: n, rank: rank, owned: owned}) AS found
WITH [f IN found WHERE f.rank = found[0].rank] AS best
WITH best, size([f IN best WHERE f.owned]) AS candidates
UNWIND best AS f
WITH f.n AS n, f.owned AS owned, candidates

// name: node_retract
// params: tenant_id, namespace, node_id, reason
// returns: id, tenant_id, namespace, owned, candidates
// mode: write
// Soft-delete one memory node of the scope (skill, trigger or fact), named by
// its id or, when no node of the tenant has that id, by a skill's or
// trigger's identifier (see `marker_target`).
// include: marker_target
CALL (n, owned, candidates) {
  WITH n WHERE owned AND candidates = 1
  SET n:SymfonicRetracted, n.symfonic_retracted_at = datetime(), n.symfonic_retracted_reason = $reason
}
RETURN n.id AS id, n.tenant_id AS tenant_id, n.namespace AS namespace, owned, candidates;

// name: node_restore
// params: tenant_id, namespace, node_id
// returns: id, tenant_id, namespace, owned, candidates
// mode: write
// include: marker_target
CALL (n, owned, candidates) {
  WITH n WHERE owned AND candidates = 1
  REMOVE n:SymfonicRetracted, n.symfonic_retracted_at, n.symfonic_retracted_reason
}
RETURN n.id AS id, n.tenant_id AS tenant_id, n.namespace AS namespace, owned, candidates;

// name: retracted_prune
// params: tenant_id, namespace, older_than_seconds
// returns: pruned
// mode: write
// Hard-delete the scope's own retracted nodes (exactly its namespace), and a
// skill's preconditions of the same tenant, retracted longer ago than the age.
// Runs after catalog_lock. Each candidate is locked (a property set and
// removed: no change) and its marker read again under that lock, so a
// restore or re-seed that committed after the first read keeps its node.
MATCH (n:SymfonicRetracted)
WHERE n.tenant_id = $tenant_id
  AND
  // include: node_owned(n)
  AND n.symfonic_retracted_at <= datetime() - duration({seconds: $older_than_seconds})
CALL (n) {
  SET n.symfonic_prune_lock = true
  REMOVE n.symfonic_prune_lock
}
WITH n
WHERE n:SymfonicRetracted AND n.tenant_id = $tenant_id
  AND n.symfonic_retracted_at <= datetime() - duration({seconds: $older_than_seconds})
OPTIONAL MATCH (n)-[:REQUIRES]->(p:Precondition)
WHERE p.tenant_id = n.tenant_id
WITH n, collect(p) AS pres
FOREACH (p IN pres | DETACH DELETE p)
DETACH DELETE n
RETURN count(*) AS pruned;

// name: staged_keys_held
// params: tenant_id, namespace, write_id
// returns: key, id, tenant_id, namespace
// mode: read
// Publish, before each prepare transaction (write_prepare_batch): a key the
// write would take that a node of another scope holds (a key copied by plain
// Cypher after the write was staged). The publish is refused, naming that
// node, and the transaction changes nothing.
CALL () {
  MATCH (n:Skill:SymfonicUnpublished)
  WHERE n.tenant_id = $tenant_id
    AND
    // include: node_owned(n)
    AND n.symfonic_write_id = $write_id AND n.symfonic_base_key IS NOT NULL
    AND n.symfonic_published_at IS NULL
  MATCH (held:Skill {symfonic_key: n.symfonic_base_key})
  RETURN n, held
  UNION
  MATCH (n:Trigger:SymfonicUnpublished)
  WHERE n.tenant_id = $tenant_id
    AND
    // include: node_owned(n)
    AND n.symfonic_write_id = $write_id AND n.symfonic_base_key IS NOT NULL
    AND n.symfonic_published_at IS NULL
  MATCH (held:Trigger {symfonic_key: n.symfonic_base_key})
  RETURN n, held
}
WITH n, held
WHERE held.tenant_id IS NULL OR held.tenant_id <> n.tenant_id
   OR NOT
   // include: same_namespace(held, n)
RETURN n.symfonic_base_key AS key, held.id AS id, held.tenant_id AS tenant_id, held.namespace AS namespace
LIMIT 1;

// name: write_unlist
// params: tenant_id, entries
// returns: remaining
// mode: write
// Drop folded entries from the tenant's list of published writes.
MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH c, coalesce(c.published_writes, []) AS published, coalesce(c.published_at_ms, []) AS times
WITH c, published, times, [i IN range(0, size(published) - 1) WHERE NOT published[i] IN $entries] AS keep
SET c.published_writes = [i IN keep | published[i]], c.published_at_ms = [i IN keep | times[i]]
RETURN size(keep) AS remaining;

// name: write_id_published
// params: tenant_id, namespace, write_id
// returns: published
// mode: write
// Whether a write_id was already published in this scope (and not yet folded):
// staging under it again is refused, or the new nodes would show at once.
// MERGE locks the catalog node, so staging and publishing one write serialize.
MERGE (c:SymfonicCatalog {tenant_id: $tenant_id})
ON CREATE SET c.version = 0
RETURN (coalesce($namespace, '') + '\u001F' + $write_id) IN coalesce(c.published_writes, [])
       OR ('\u001F' + $write_id) IN coalesce(c.published_writes, []) AS published;

// name: catalog_lock
// params: tenant_id
// returns: tenant_id
// mode: write
// Take the write lock on the tenant's catalog node. Run first in every
// transaction that reads and rewrites `published_writes`, so the later
// statements read the list after every earlier writer committed (read
// committed isolation would otherwise lose concurrent appends).
MERGE (c:SymfonicCatalog {tenant_id: $tenant_id})
ON CREATE SET c.version = 0
SET c.symfonic_locked_at = datetime()
RETURN c.tenant_id AS tenant_id;
