// name: tenants_list
// params:
// returns: tenant_id, namespaces, skills, drafts, rejected, triggers, facts, catalog_version
// mode: read
// Every tenant holding memory (operator read, across tenants): its
// namespaces, skills by status (approved, draft, rejected: apart; a skill of
// any other status, which no read shows, in none of them), pending triggers,
// facts and catalog version. Retracted nodes are not counted. One row per
// tenant, by id.
CALL () {
  MATCH (n:Skill) WHERE NOT n:SymfonicRetracted
  RETURN n.tenant_id AS tenant_id, n.namespace AS namespace,
         CASE n.status WHEN 'approved' THEN 'skill' WHEN 'draft' THEN 'draft' WHEN 'rejected' THEN 'rejected'
                       ELSE 'other' END AS kind
  UNION ALL
  MATCH (n:Trigger) WHERE NOT n:SymfonicRetracted
  RETURN n.tenant_id AS tenant_id, n.namespace AS namespace,
         CASE WHEN n.status = 'pending' THEN 'trigger' ELSE 'resolved' END AS kind
  UNION ALL
  MATCH (n:Fact) WHERE NOT n:SymfonicRetracted
  RETURN n.tenant_id AS tenant_id, n.namespace AS namespace, 'fact' AS kind
  UNION ALL
  MATCH (c:SymfonicCatalog) RETURN c.tenant_id AS tenant_id, null AS namespace, 'catalog' AS kind
}
WITH tenant_id, namespace, kind WHERE valueType(tenant_id) STARTS WITH 'STRING'
WITH tenant_id, collect(DISTINCT toStringOrNull(namespace)) AS namespaces,
     sum(CASE kind WHEN 'skill' THEN 1 ELSE 0 END) AS skills,
     sum(CASE kind WHEN 'draft' THEN 1 ELSE 0 END) AS drafts,
     sum(CASE kind WHEN 'rejected' THEN 1 ELSE 0 END) AS rejected,
     sum(CASE kind WHEN 'trigger' THEN 1 ELSE 0 END) AS triggers,
     sum(CASE kind WHEN 'fact' THEN 1 ELSE 0 END) AS facts
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: tenant_id})
RETURN tenant_id, [ns IN namespaces WHERE ns IS NOT NULL | ns] AS namespaces, skills, drafts, rejected, triggers,
       facts,
       CASE WHEN valueType(c.version) STARTS WITH 'INTEGER' THEN c.version END AS catalog_version
ORDER BY tenant_id;

// name: tenant_holds
// params: tenant_id
// returns: holds
// mode: read
// Whether the tenant holds any node at all (an index seek per label).
RETURN EXISTS { MATCH (n:Skill {tenant_id: $tenant_id}) }
    OR EXISTS { MATCH (n:Trigger {tenant_id: $tenant_id}) }
    OR EXISTS { MATCH (n:Fact {tenant_id: $tenant_id}) }
    OR EXISTS { MATCH (n:SymfonicCatalog {tenant_id: $tenant_id}) } AS holds;

// name: tenant_ids
// params:
// returns: tenant_ids
// mode: read
// Every tenant id in use (for a "did you mean" hint).
CALL () {
  MATCH (n:Skill) RETURN DISTINCT n.tenant_id AS tenant_id
  UNION
  MATCH (n:Trigger) RETURN DISTINCT n.tenant_id AS tenant_id
  UNION
  MATCH (n:Fact) RETURN DISTINCT n.tenant_id AS tenant_id
  UNION
  MATCH (n:SymfonicCatalog) RETURN DISTINCT n.tenant_id AS tenant_id
}
WITH tenant_id WHERE valueType(tenant_id) STARTS WITH 'STRING'
RETURN collect(tenant_id) AS tenant_ids;

// name: erase_skills_batch
// params: tenant_id, namespace, whole_tenant, limit
// returns: skills, preconditions
// mode: write
// Erase, step 1, one bounded batch (its own transaction): up to $limit skills
// of the tenant (all of them, or exactly those of $namespace: never
// tenant-wide ones then) with the preconditions of the same tenant they hold.
MATCH (s:Skill {tenant_id: $tenant_id})
WHERE $whole_tenant OR s.namespace = $namespace
WITH s LIMIT $limit
OPTIONAL MATCH (s)-[:REQUIRES]->(p:Precondition)
WHERE p.tenant_id = s.tenant_id
WITH s, collect(p) AS preconditions
FOREACH (p IN preconditions | DETACH DELETE p)
DETACH DELETE s
RETURN count(*) AS skills, sum(size(preconditions)) AS preconditions;

// name: erase_nodes_batch
// params: tenant_id, namespace, whole_tenant, limit
// returns: label, nodes
// mode: write
// Erase, step 2, one bounded batch: up to $limit other nodes of the scope:
// triggers, facts, trigger-selection audit nodes, decision-log nodes, change records, limit counters and, once the skills are
// gone, the tenant's remaining preconditions (for a namespace: only those of
// that namespace that no skill holds). Counts per label.
CALL () {
  MATCH (n:Trigger {tenant_id: $tenant_id}) WHERE $whole_tenant OR n.namespace = $namespace
  RETURN n, 'Trigger' AS label
  UNION ALL
  MATCH (n:Fact {tenant_id: $tenant_id}) WHERE $whole_tenant OR n.namespace = $namespace
  RETURN n, 'Fact' AS label
  UNION ALL
  MATCH (n:Precondition {tenant_id: $tenant_id})
  WHERE $whole_tenant OR (n.namespace = $namespace AND NOT EXISTS { (:Skill)-[:REQUIRES]->(n) })
  RETURN n, 'Precondition' AS label
  UNION ALL
  MATCH (n:SymfonicTriggerSelection) WHERE n.tenant_id = $tenant_id AND ($whole_tenant OR n.namespace = $namespace)
  RETURN n, 'SymfonicTriggerSelection' AS label
  UNION ALL
  MATCH (n:SymfonicDecision) WHERE n.tenant_id = $tenant_id AND ($whole_tenant OR n.namespace = $namespace)
  RETURN n, 'SymfonicDecision' AS label
  UNION ALL
  MATCH (n:SymfonicChange) WHERE n.tenant_id = $tenant_id AND ($whole_tenant OR n.namespace = $namespace)
  RETURN n, 'SymfonicChange' AS label
  UNION ALL
  MATCH (n:SymfonicLimit) WHERE n.tenant_id = $tenant_id AND ($whole_tenant OR n.namespace = $namespace)
  RETURN n, 'SymfonicLimit' AS label
}
WITH n, label LIMIT $limit
DETACH DELETE n
RETURN label, count(*) AS nodes;

// name: erase_catalog
// params: tenant_id
// returns: catalogs
// mode: write
// Erase of a whole tenant, last step: its catalog node (version and list of
// published writes). Runs after every memory node of the tenant is gone, on
// its own: deleting the node takes its write lock (a publish in progress
// commits first), and a tenant without one counts 0 (catalog_lock would
// create the node it then deletes).
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
DETACH DELETE c
RETURN count(c) AS catalogs;
