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

// name: doctor_bad_preconditions
// params: tenant_id
// Unknown kinds, unknown ops, missing fields, non-integer positions.
MATCH (s:Skill)-[r:REQUIRES]->(p:Precondition)
WHERE $tenant_id IS NULL OR s.tenant_id = $tenant_id
WITH s, r, p,
     CASE
       WHEN NOT valueType(r.position) STARTS WITH 'INTEGER' THEN 'REQUIRES.position is not an integer'
       WHEN p.kind IS NULL OR NOT p.kind IN ['tool', 'state', 'text'] THEN 'unknown kind ' + coalesce(toString(p.kind), 'null')
       WHEN p.kind = 'tool' AND NOT valueType(p.tool) STARTS WITH 'STRING' THEN 'tool precondition without a string tool'
       WHEN p.kind = 'text' AND NOT valueType(p.text) STARTS WITH 'STRING' THEN 'text precondition without a string text'
       WHEN p.kind = 'state' AND NOT valueType(p.path) STARTS WITH 'STRING' THEN 'state precondition without a string path'
       WHEN p.kind = 'state' AND (p.op IS NULL OR NOT p.op IN ['eq', 'neq', 'in', 'exists'])
         THEN 'unknown op ' + coalesce(toString(p.op), 'null') + ' (the skill is filtered out: fails closed)'
       WHEN p.kind = 'state' AND p.op <> 'exists' AND p.value IS NULL THEN 'state op ' + p.op + ' without a value'
       WHEN p.kind = 'state' AND p.op = 'in' AND NOT valueType(p.value) STARTS WITH 'LIST' THEN 'state op in needs a list value'
     END AS problem
WHERE problem IS NOT NULL
RETURN 'Precondition' AS label, toString(s.id) + '#' + toString(r.position) AS node, problem
LIMIT 1000;

// name: doctor_bad_skills
// params: tenant_id
// Skills with wrong property types or values: skipped on read.
MATCH (s:Skill)
WHERE $tenant_id IS NULL OR s.tenant_id = $tenant_id
WITH s,
     CASE
       WHEN NOT valueType(s.id) STARTS WITH 'STRING' THEN 'id is not a string'
       WHEN NOT valueType(s.label) STARTS WITH 'STRING' THEN 'label is not a string'
       WHEN s.steps IS NOT NULL AND NOT valueType(s.steps) STARTS WITH 'LIST<STRING' THEN 'steps is not a list of strings'
       WHEN s.context IS NOT NULL AND NOT valueType(s.context) STARTS WITH 'STRING' THEN 'context is not a string'
       WHEN s.action_tool IS NOT NULL AND NOT valueType(s.action_tool) STARTS WITH 'STRING' THEN 'action_tool is not a string'
       WHEN s.active IS NOT NULL AND NOT valueType(s.active) STARTS WITH 'BOOLEAN' THEN 'active is not a boolean'
       WHEN s.status IS NULL OR NOT s.status IN ['approved', 'draft', 'rejected']
         THEN 'status ' + coalesce(toString(s.status), 'null') + ' is not approved|draft|rejected (hidden)'
     END AS problem
WHERE problem IS NOT NULL
RETURN 'Skill' AS label, coalesce(toString(s.id), elementId(s)) AS node, problem
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
