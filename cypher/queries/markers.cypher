// name: node_retract
// params: tenant_id, namespace, node_id, reason
// Soft-delete one memory node of the scope (skill, trigger or fact).
CALL () {
  MATCH (n:Skill {id: $node_id}) RETURN n
  UNION
  MATCH (n:Trigger {id: $node_id}) RETURN n
  UNION
  MATCH (n:Fact {id: $node_id}) RETURN n
}
WITH n WHERE n.tenant_id = $tenant_id AND (n.namespace IS NULL OR n.namespace = $namespace)
SET n:SymfonicRetracted, n.symfonic_retracted_at = datetime(), n.symfonic_retracted_reason = $reason
RETURN n.id AS id, n.tenant_id AS tenant_id;

// name: node_restore
// params: tenant_id, namespace, node_id
CALL () {
  MATCH (n:Skill {id: $node_id}) RETURN n
  UNION
  MATCH (n:Trigger {id: $node_id}) RETURN n
  UNION
  MATCH (n:Fact {id: $node_id}) RETURN n
}
WITH n WHERE n.tenant_id = $tenant_id AND (n.namespace IS NULL OR n.namespace = $namespace)
REMOVE n:SymfonicRetracted, n.symfonic_retracted_at, n.symfonic_retracted_reason
RETURN n.id AS id, n.tenant_id AS tenant_id;

// name: retracted_prune
// params: tenant_id, namespace, older_than_seconds
// Hard-delete retracted nodes (and a skill's preconditions) retracted longer ago than the age.
MATCH (n:SymfonicRetracted)
WHERE n.tenant_id = $tenant_id
  AND (n.namespace IS NULL OR n.namespace = $namespace)
  AND n.symfonic_retracted_at <= datetime() - duration({seconds: $older_than_seconds})
OPTIONAL MATCH (n)-[:REQUIRES]->(p:Precondition)
WITH n, collect(p) AS pres
FOREACH (p IN pres | DETACH DELETE p)
DETACH DELETE n
RETURN count(*) AS pruned;

// name: write_replace_live
// params: tenant_id, namespace, write_id
// Publish, step 1: a staged skill re-seeding an identifier replaces the live one.
MATCH (n:Skill:SymfonicUnpublished)
WHERE n.tenant_id = $tenant_id
  AND (n.namespace IS NULL OR n.namespace = $namespace)
  AND n.symfonic_write_id = $write_id AND n.symfonic_base_key IS NOT NULL
MATCH (old:Skill {symfonic_key: n.symfonic_base_key})
OPTIONAL MATCH (old)-[:REQUIRES]->(p:Precondition)
WITH old, collect(p) AS pres
FOREACH (p IN pres | DETACH DELETE p)
DETACH DELETE old
RETURN count(*) AS replaced;

// name: write_publish
// params: tenant_id, namespace, write_id
// Publish, step 2 (same transaction): every node of the write becomes visible.
MATCH (n:SymfonicUnpublished)
WHERE n.tenant_id = $tenant_id
  AND (n.namespace IS NULL OR n.namespace = $namespace)
  AND n.symfonic_write_id = $write_id
REMOVE n:SymfonicUnpublished
SET n.symfonic_key = coalesce(n.symfonic_base_key, n.symfonic_key), n.symfonic_base_key = null,
    n.symfonic_published_at = datetime()
RETURN count(n) AS published, collect(DISTINCT n.tenant_id) AS tenants;

// name: write_discard
// params: tenant_id, namespace, write_id
// Delete every node of a staged write (and a staged skill's preconditions).
MATCH (n:SymfonicUnpublished)
WHERE n.tenant_id = $tenant_id
  AND (n.namespace IS NULL OR n.namespace = $namespace)
  AND n.symfonic_write_id = $write_id
OPTIONAL MATCH (n)-[:REQUIRES]->(p:Precondition)
WITH n, collect(p) AS pres
FOREACH (p IN pres | DETACH DELETE p)
DETACH DELETE n
RETURN count(*) AS discarded;
