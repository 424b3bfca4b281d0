// name: doctor_untenanted
// params:
// Memory nodes without a string tenant_id: visible to nobody.
MATCH (n)
WHERE (n:Skill OR n:Trigger OR n:Fact OR n:Precondition)
  AND (n.tenant_id IS NULL OR NOT valueType(n.tenant_id) STARTS WITH 'STRING')
RETURN labels(n)[0] AS label, coalesce(toString(n.id), elementId(n)) AS node,
       'no string tenant_id: invisible to every tenant' AS problem
LIMIT 1000;

// name: doctor_foreign_preconditions
// params: tenant_id
// Preconditions whose tenant differs from their skill's: ignored on read.
MATCH (s:Skill)-[:REQUIRES]->(p:Precondition)
WHERE (p.tenant_id IS NULL OR p.tenant_id <> s.tenant_id)
  AND ($tenant_id IS NULL OR s.tenant_id = $tenant_id)
RETURN 'Precondition' AS label, elementId(p) AS node,
       'tenant ' + coalesce(toString(p.tenant_id), 'null') + ' differs from its skill ' + toString(s.id) + ' tenant '
       + coalesce(toString(s.tenant_id), 'null') AS problem
LIMIT 1000;

// name: doctor_skills
// params: tenant_id, after, limit
// Every skill (of one tenant, or all), through the one projection a turn
// reads, in pages of $limit after element id $after: doctor validates each
// row with the same model as TurnMemory and reports what a turn would skip.
MATCH (s:Skill)
WHERE ($tenant_id IS NULL OR s.tenant_id = $tenant_id) AND elementId(s) > $after
WITH s ORDER BY elementId(s) LIMIT $limit
// include: skill_row
RETURN elementId(s) AS element_id, skill_row;

// name: doctor_catalogs
// params: tenant_id
// Catalog versions that are not non-negative integers: the tenant's skills are
// then read on every turn (never cached) until a library write repairs them.
MATCH (c:SymfonicCatalog)
WHERE ($tenant_id IS NULL OR c.tenant_id = $tenant_id)
  AND NOT coalesce(valueType(c.version) STARTS WITH 'INTEGER' AND c.version >= 0, false)
RETURN 'SymfonicCatalog' AS label, coalesce(toString(c.tenant_id), elementId(c)) AS node,
       'version ' + coalesce(toStringOrNull(c.version), '?') + ' (' + valueType(c.version)
       + ') is not a non-negative integer: skills are read on every turn until the next library write' AS problem
LIMIT 1000;

// name: doctor_bad_triggers
// params: tenant_id
MATCH (t:Trigger)
WHERE $tenant_id IS NULL OR t.tenant_id = $tenant_id
WITH t,
     CASE
       WHEN NOT valueType(t.id) STARTS WITH 'STRING' THEN 'id is not a string'
       WHEN NOT valueType(t.condition) STARTS WITH 'STRING' THEN 'condition is not a string'
       WHEN NOT valueType(t.task) STARTS WITH 'STRING' THEN 'task is not a string'
       WHEN t.status IS NULL OR NOT t.status IN ['pending', 'resolved'] THEN 'status is not pending|resolved'
     END AS problem
WHERE problem IS NOT NULL
RETURN 'Trigger' AS label, coalesce(toString(t.id), elementId(t)) AS node, problem
LIMIT 1000;

// name: doctor_indexes
// params:
SHOW INDEXES YIELD name, state RETURN name, state;
