// name: memory_recall
// params: tenant_id, namespace, write_id, search, search_unstamped, labels, limit
// returns: kind, id, tenant_id, namespace, label, condition, task, text, score
// mode: read
// Generic recall: full-text search over skills, triggers and facts (index
// symfonic_memory_text_v3, migration 0007). `search` is built by
// recall.recall_search: `+symfonic_tenant_token:<token>^0 +(<text fields>:(<terms>))`,
// so the exact tenant is a required clause INSIDE the search (one token
// Lucene cannot widen to another tenant) and the procedure yields only this
// tenant's candidates. While some skill, trigger or fact OF THIS TENANT has
// no token yet (seeded with plain Cypher; found from the tenant's own index
// entries, so another tenant's hand-seeded nodes never change this tenant's
// query or its cost), `search_unstamped` is used instead: its tenant clause
// also accepts the phrase over `tenant_id`, so those nodes are still found. The clause has
// boost 0: a node that matched the tenant but none of the terms scores 0 and
// is dropped here (`score > 0`). The exact equality below stays the authority
// on visibility: tenant, namespace, markers, approved and active skills only,
// pending triggers only. `labels` lists the node labels the retrieval policy
// allows.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     CASE WHEN EXISTS { MATCH (n:Skill) WHERE n.tenant_id = $tenant_id AND NOT n:SymfonicTokened }
            OR EXISTS { MATCH (n:Trigger) WHERE n.tenant_id = $tenant_id AND NOT n:SymfonicTokened }
            OR EXISTS { MATCH (n:Fact) WHERE n.tenant_id = $tenant_id AND NOT n:SymfonicTokened }
          THEN $search_unstamped ELSE $search END AS search
CALL db.index.fulltext.queryNodes('symfonic_memory_text_v3', search) YIELD node, score
WITH node, score, published,
     CASE WHEN node:Skill THEN 'Skill' WHEN node:Trigger THEN 'Trigger' WHEN node:Fact THEN 'Fact' END AS kind
WHERE score > 0
  AND node.tenant_id = $tenant_id
  AND (node.namespace IS NULL OR node.namespace = $namespace)
  AND NOT node:SymfonicRetracted
  AND
  // include: visible_version(node, $write_id)
  AND kind IN $labels
  AND (kind <> 'Skill' OR (node.status = 'approved' AND coalesce(node.active, true) = true))
  AND (kind <> 'Trigger' OR node.status = 'pending')
RETURN kind, node.id AS id, node.tenant_id AS tenant_id, node.namespace AS namespace,
       node.label AS label, node.condition AS condition, node.task AS task, node.text AS text, score
ORDER BY score DESC, id
LIMIT $limit;
