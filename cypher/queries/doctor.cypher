// fragment: doctor_tenant_skills
// params: tenant_id
// The skills doctor checks, as `s`: those of tenant $tenant_id, through its
// index, or every skill when $tenant_id is null. The second branch is a label
// scan that its filter keeps from starting when a tenant is given, so a
// tenant's doctor run costs what the tenant holds, not what the database holds.
CALL () {
  MATCH (s:Skill {tenant_id: $tenant_id})
  RETURN s
  UNION ALL
  WITH 1 AS every_tenant WHERE $tenant_id IS NULL
  MATCH (s:Skill)
  RETURN s
}

// fragment: doctor_tenant_triggers
// params: tenant_id
// The triggers doctor checks, as `t`: as doctor_tenant_skills.
CALL () {
  MATCH (t:Trigger {tenant_id: $tenant_id})
  RETURN t
  UNION ALL
  WITH 1 AS every_tenant WHERE $tenant_id IS NULL
  MATCH (t:Trigger)
  RETURN t
}

// name: doctor_untenanted
// params: after, limit
// returns: element_id, label, node, tenant_id, namespace, problems
// mode: read
// Memory nodes without a usable tenant_id (absent, not a string, or empty):
// visible to nobody. One page of $limit after element id $after. Every
// expression here survives any property type (toStringOrNull, valueType):
// doctor must never crash on the data it is meant to report.
MATCH (n)
WHERE (n:Skill OR n:Trigger OR n:Fact OR n:Precondition)
  AND NOT coalesce(valueType(n.tenant_id) STARTS WITH 'STRING' AND n.tenant_id <> '', false)
  AND elementId(n) > $after
WITH n ORDER BY elementId(n) LIMIT $limit
RETURN elementId(n) AS element_id,
       CASE WHEN n:Skill THEN 'Skill' WHEN n:Trigger THEN 'Trigger' WHEN n:Fact THEN 'Fact' ELSE 'Precondition' END
         AS label,
       coalesce(toStringOrNull(n.id), elementId(n)) AS node, null AS tenant_id, toStringOrNull(n.namespace) AS namespace,
       [CASE
          WHEN n.tenant_id IS NULL THEN 'no tenant_id'
          WHEN valueType(n.tenant_id) STARTS WITH 'STRING' THEN 'empty tenant_id'
          ELSE 'tenant_id is a ' + replace(valueType(n.tenant_id), ' NOT NULL', '') + ', not a string'
        END + ': invisible to every tenant'] AS problems;

// name: doctor_foreign_preconditions
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, problems
// mode: read
// REQUIRES edges from a skill to a precondition of another tenant (or of
// none, e.g. a misspelt `tenantid`): every read of the skill takes it for an
// unreadable precondition, so the skill blocks its action until it is fixed,
// and none of its content is read. Reported on the skill, with the edge's
// position and the precondition's element id.
// include: doctor_tenant_skills
MATCH (s)-[r:REQUIRES]->(p:Precondition)
WHERE valueType(s.tenant_id) STARTS WITH 'STRING'
  AND NOT coalesce(p.tenant_id = s.tenant_id, false)
  AND elementId(r) > $after
WITH s, r, p ORDER BY elementId(r) LIMIT $limit
RETURN elementId(r) AS element_id, 'Skill' AS label, coalesce(toStringOrNull(s.id), elementId(s)) AS node,
       s.tenant_id AS tenant_id, toStringOrNull(s.namespace) AS namespace,
       ['REQUIRES edge (position ' + coalesce(toStringOrNull(r.position), 'none') + ') to Precondition '
        + elementId(p) + ' of '
        + CASE
            WHEN p.tenant_id IS NULL THEN 'no tenant'
            WHEN valueType(p.tenant_id) STARTS WITH 'STRING' THEN 'tenant ' + p.tenant_id
            ELSE 'a ' + replace(valueType(p.tenant_id), ' NOT NULL', '') + ' tenant_id'
          END
        + ", not this skill's tenant " + s.tenant_id
        + ": it cannot be attributed to the skill's tenant, so the skill blocks its action (fails closed) and none "
        + "of its content is read; give the precondition the skill's tenant_id, or delete the edge"]
         AS problems;

// name: doctor_skills
// params: tenant_id, after, limit
// returns: element_id, skill_row, skill_keys, precondition_keys
// mode: read
// Every skill with a string tenant (of one tenant, or all), through the one
// projection a turn reads, in pages of $limit after element id $after: doctor
// validates each row with the same model as TurnMemory and reports what a turn
// would skip. Skills without a string tenant are doctor_untenanted's. With
// each row, the property names of the skill and of each of its preconditions
// (with the edge's position), for doctor to name near misses (`same_arg`).
// include: doctor_tenant_skills
WITH s
WHERE valueType(s.tenant_id) STARTS WITH 'STRING'
  AND elementId(s) > $after
WITH s ORDER BY elementId(s) LIMIT $limit
// include: skill_row
RETURN elementId(s) AS element_id, skill_row, keys(s) AS skill_keys,
       [(s)-[r:REQUIRES]->(p:Precondition) | {position: r.position, keys: keys(p)}] AS precondition_keys;

// name: doctor_identifiers
// params: tenant_id
// returns: tenant_id, namespace, identifier, holders
// mode: read
// Identifiers held by two or more live skills of one scope (approved, active,
// not retracted, not staged): every turn enforces all of them, and a library
// re-seed of the identifier replaces only the one holding its key (or adds a
// third). Drafts and staged writes wait beside the live skill by design.
// include: doctor_tenant_skills
WITH s
WHERE valueType(s.tenant_id) STARTS WITH 'STRING' AND valueType(s.identifier) STARTS WITH 'STRING'
  AND s.status = 'approved' AND coalesce(s.active, true) = true
  AND NOT s:SymfonicRetracted AND NOT s:SymfonicUnpublished
WITH s.tenant_id AS tenant_id, toStringOrNull(s.namespace) AS namespace, s.identifier AS identifier,
     collect(coalesce(toStringOrNull(s.id), elementId(s))) AS holders
WHERE size(holders) > 1
RETURN tenant_id, namespace, identifier, holders
ORDER BY tenant_id, namespace, identifier;

// name: doctor_keys
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, key
// mode: read
// The identifier keys of skills and triggers with a string tenant, for doctor
// to compare with the node's own scope (in Python: a key is JSON).
CALL () {
  // include: doctor_tenant_skills
  WITH s WHERE s.symfonic_key IS NOT NULL
  RETURN s AS n, 'Skill' AS label
  UNION ALL
  // include: doctor_tenant_triggers
  WITH t WHERE t.symfonic_key IS NOT NULL
  RETURN t AS n, 'Trigger' AS label
}
WITH n, label
WHERE valueType(n.tenant_id) STARTS WITH 'STRING' AND elementId(n) > $after
WITH n, label ORDER BY elementId(n) LIMIT $limit
RETURN elementId(n) AS element_id, label, coalesce(toStringOrNull(n.id), elementId(n)) AS node,
       n.tenant_id AS tenant_id, n.namespace AS namespace, n.symfonic_key AS key;

// name: doctor_catalogs
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, problems
// mode: read
// Catalogs of an odd shape. A version that is not a non-negative integer: the
// tenant's skills are then read on every turn (never cached) until a library
// write repairs it. A published_writes that is not a list: staged writes of
// the tenant are never seen as published.
CALL () {
  MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
  RETURN c
  UNION ALL
  WITH 1 AS every_tenant WHERE $tenant_id IS NULL
  MATCH (c:SymfonicCatalog)
  RETURN c
}
WITH c
WHERE elementId(c) > $after
WITH c, [x IN [
       CASE WHEN NOT coalesce(valueType(c.version) STARTS WITH 'INTEGER' AND c.version >= 0, false)
         THEN 'version ' + coalesce(toStringOrNull(c.version), '?') + ' ('
              + replace(valueType(c.version), ' NOT NULL', '')
              + ') is not a non-negative integer: skills are read on every turn until the next library write'
       END,
       CASE WHEN c.published_writes IS NOT NULL AND NOT valueType(c.published_writes) STARTS WITH 'LIST'
         THEN 'published_writes is a ' + replace(valueType(c.published_writes), ' NOT NULL', '')
              + ', not a list: staged writes of this tenant are never seen as published'
       END,
       CASE WHEN NOT valueType(c.tenant_id) STARTS WITH 'STRING'
         THEN 'tenant_id is not a string: no tenant reads this catalog'
       END
     ] WHERE x IS NOT NULL] AS problems
WHERE size(problems) > 0
WITH c, problems ORDER BY elementId(c) LIMIT $limit
RETURN elementId(c) AS element_id, 'SymfonicCatalog' AS label,
       coalesce(toStringOrNull(c.tenant_id), elementId(c)) AS node, toStringOrNull(c.tenant_id) AS tenant_id,
       null AS namespace, problems;

// name: doctor_bad_triggers
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, problems
// mode: read
// Triggers with a string tenant that a turn skips or cannot use: id,
// condition or task not strings, a namespace that is not a string (no scope
// sees it), a status other than pending|resolved (never read), an empty task,
// a kind other than text|time|event, an event trigger without on_tool, a
// same_args that is not text, a time trigger without a zoned due_at, a
// due_at, expires_at or snoozed_until that is not a zoned datetime (a time
// zone is what makes it an instant), and a pending trigger whose expires_at
// has passed (never offered again: acknowledge or cancel it).
// include: doctor_tenant_triggers
WITH t
WHERE valueType(t.tenant_id) STARTS WITH 'STRING'
  AND elementId(t) > $after
WITH t, [x IN [
       CASE WHEN NOT valueType(t.id) STARTS WITH 'STRING'
         THEN 'id is ' + CASE WHEN t.id IS NULL THEN 'missing' ELSE 'a ' + replace(valueType(t.id), ' NOT NULL', '')
              END + ', not a string: skipped by every read'
       END,
       CASE WHEN t.namespace IS NOT NULL AND NOT valueType(t.namespace) STARTS WITH 'STRING'
         THEN 'namespace is a ' + replace(valueType(t.namespace), ' NOT NULL', '')
              + ', not a string or null: invisible to every scope'
       END,
       CASE WHEN NOT valueType(t.condition) STARTS WITH 'STRING'
         THEN 'condition is ' + CASE WHEN t.condition IS NULL THEN 'missing'
              ELSE 'a ' + replace(valueType(t.condition), ' NOT NULL', '') END + ', not a string: skipped by every read'
       END,
       CASE
         WHEN NOT valueType(t.task) STARTS WITH 'STRING'
           THEN 'task is ' + CASE WHEN t.task IS NULL THEN 'missing'
                ELSE 'a ' + replace(valueType(t.task), ' NOT NULL', '') END + ', not a string: skipped by every read'
         WHEN trim(t.task) = '' THEN 'task is empty: the reminder offers the model nothing'
       END,
       CASE WHEN t.kind IS NOT NULL AND NOT coalesce(t.kind IN ['text', 'time', 'event', 'semantic'], false)
         THEN 'kind ' + CASE WHEN valueType(t.kind) STARTS WITH 'STRING' THEN "'" + t.kind + "'"
                             ELSE 'is a ' + replace(valueType(t.kind), ' NOT NULL', '') END
              + ' is not text|time|event|semantic: never offered'
       END,
       // The same tests as the turn's scoring (trigger_similarity): a list of numbers with a usable norm.
       CASE
         WHEN coalesce(t.kind = 'semantic', false) AND NOT
                // include: embedding_numbers(t)
           THEN 'a semantic trigger whose embedding is ' + CASE WHEN t.embedding IS NULL THEN 'missing'
                ELSE 'a ' + replace(valueType(t.embedding), ' NOT NULL', '') END
                + ', not a list of numbers: never offered (write it with ProspectiveLayer(store, embeddings=...))'
         WHEN coalesce(t.kind = 'semantic', false) AND NOT
                // include: embedding_norm_usable(t)
           THEN 'a semantic trigger whose embedding is all zeros, empty or out of float32 range: never offered'
         WHEN NOT coalesce(t.kind = 'semantic', false) AND t.embedding IS NOT NULL
           THEN 'an embedding on a trigger that is not semantic: ignored'
       END,
       CASE WHEN coalesce(t.kind = 'event', false) AND NOT valueType(t.on_tool) STARTS WITH 'STRING'
         THEN 'an event trigger without an on_tool string: never offered'
       END,
       CASE WHEN t.same_args IS NOT NULL AND NOT valueType(t.same_args) STARTS WITH 'STRING'
         THEN 'same_args is a ' + replace(valueType(t.same_args), ' NOT NULL', '')
              + ', not the JSON text of a mapping: the trigger is skipped by every read'
       END,
       CASE WHEN coalesce(t.kind = 'time', false) AND t.due_at IS NULL
         THEN 'a time trigger without due_at: never offered'
       END,
       CASE WHEN t.due_at IS NOT NULL AND NOT valueType(t.due_at) STARTS WITH 'ZONED DATETIME'
         THEN 'due_at is a ' + replace(valueType(t.due_at), ' NOT NULL', '')
              + ', not a datetime with a time zone: never offered'
       END,
       CASE WHEN t.expires_at IS NOT NULL AND NOT valueType(t.expires_at) STARTS WITH 'ZONED DATETIME'
         THEN 'expires_at is a ' + replace(valueType(t.expires_at), ' NOT NULL', '')
              + ', not a datetime with a time zone: ignored (the trigger never expires)'
       END,
       CASE WHEN t.snoozed_until IS NOT NULL AND NOT valueType(t.snoozed_until) STARTS WITH 'ZONED DATETIME'
         THEN 'snoozed_until is a ' + replace(valueType(t.snoozed_until), ' NOT NULL', '')
              + ', not a datetime with a time zone: ignored'
       END,
       CASE WHEN coalesce(t.status = 'pending' AND t.expires_at <= datetime(), false)
         THEN 'expired at ' + toString(t.expires_at) + ' and still pending: never offered again; '
              + 'acknowledge or cancel it (`symfonic-graph triggers cancel`)'
       END,
       CASE WHEN NOT coalesce(t.status IN ['pending', 'resolved'], false)
         THEN 'status ' + CASE
                WHEN t.status IS NULL THEN 'is missing'
                WHEN valueType(t.status) STARTS WITH 'STRING' THEN "'" + t.status + "' is not pending|resolved"
                ELSE 'is a ' + replace(valueType(t.status), ' NOT NULL', '') + ', not pending|resolved'
              END + ': never read'
       END
     ] WHERE x IS NOT NULL] AS problems
WHERE size(problems) > 0
WITH t, problems ORDER BY elementId(t) LIMIT $limit
RETURN elementId(t) AS element_id, 'Trigger' AS label, coalesce(toStringOrNull(t.id), elementId(t)) AS node,
       t.tenant_id AS tenant_id, toStringOrNull(t.namespace) AS namespace, problems;

// name: doctor_trigger_keys
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, problems
// mode: read
// Triggers with a string tenant whose scope key (migration 0007) is missing
// or stale: seeded with plain Cypher (read, but through the tenant scan that
// every turn then runs), or moved with a plain-Cypher `SET t.namespace` or
// `SET t.tenant_id` (hidden from every turn until re-stamped).
// include: doctor_tenant_triggers
WITH t
WHERE valueType(t.tenant_id) STARTS WITH 'STRING'
  AND elementId(t) > $after
WITH t,
  // include: trigger_scope_of
  AS scope_key,
  // include: trigger_offer_at(t)
  AS offer_at
WITH t, CASE
       WHEN NOT t:SymfonicScoped OR NOT t:SymfonicOfferKeyed
         THEN 'no scope key or offer key (seeded with plain Cypher, or by an older release): read, but every '
              + 'turn then scans the triggers of its tenant; run `symfonic-graph schema apply` to stamp it'
       WHEN NOT coalesce(t.symfonic_scope = scope_key, t.symfonic_scope IS NULL AND scope_key IS NULL)
         THEN 'its scope key names another scope than its tenant_id and namespace (changed with plain Cypher): '
              + 'hidden from every turn; run `symfonic-graph schema apply` to stamp it again'
       WHEN NOT coalesce(t.symfonic_offer_at = offer_at, false)
         THEN 'its offer key differs from its due_at and snoozed_until (changed with plain Cypher): it may be '
              + 'offered late; run `symfonic-graph schema apply` to stamp it again'
     END AS problem
WHERE problem IS NOT NULL
WITH t, problem ORDER BY elementId(t) LIMIT $limit
RETURN elementId(t) AS element_id, 'Trigger' AS label, coalesce(toStringOrNull(t.id), elementId(t)) AS node,
       t.tenant_id AS tenant_id, toStringOrNull(t.namespace) AS namespace, [problem] AS problems;

// name: doctor_trigger_cap
// params: tenant_id, max_triggers
// returns: tenant_id, namespace, wide, visible
// mode: read
// Scopes that see more than $max_triggers pending triggers: a turn reads at
// most that many, oldest first, so the newer ones are never offered. Counts
// what a turn of the scope sees (pending, not retracted, published): a
// namespace sees its own and the tenant-wide ones. A namespace is listed only
// when the tenant-wide triggers alone are within the cap.
// include: doctor_tenant_triggers
WITH t
WHERE valueType(t.tenant_id) STARTS WITH 'STRING'
  AND t.status = 'pending' AND NOT t:SymfonicRetracted
  AND (t.namespace IS NULL OR valueType(t.namespace) STARTS WITH 'STRING')
WITH t.tenant_id AS tenant_id, collect(t) AS pending
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: tenant_id})
WITH tenant_id, pending,
     CASE WHEN valueType(c.published_writes) STARTS WITH 'LIST' THEN c.published_writes ELSE [] END AS published
UNWIND pending AS t
WITH tenant_id, published, t
WHERE NOT coalesce(t.symfonic_replaced_by IN published, false)
  AND (NOT t:SymfonicUnpublished
       OR (coalesce(t.namespace, '') + '\u001F' + coalesce(toStringOrNull(t.symfonic_write_id), '')) IN published)
WITH tenant_id, t.namespace AS namespace, count(t) AS own
WITH tenant_id, collect({namespace: namespace, own: own}) AS scopes
WITH tenant_id, scopes,
     reduce(wide = 0, s IN scopes | wide + CASE WHEN s.namespace IS NULL THEN s.own ELSE 0 END) AS wide
UNWIND scopes AS s
WITH tenant_id, s.namespace AS namespace, wide,
     CASE WHEN s.namespace IS NULL THEN s.own ELSE s.own + wide END AS visible
WHERE visible > $max_triggers AND (namespace IS NULL OR wide <= $max_triggers)
RETURN tenant_id, namespace, wide, visible
ORDER BY tenant_id, namespace;

// name: doctor_embedding_lengths
// params: tenant_id
// returns: tenant_id, lengths
// mode: read
// Tenants whose pending semantic triggers hold embeddings of more than one
// length: a turn's embedding is compared only with embeddings of its own
// length, so the others are never offered (two models, or a model changed
// without re-embedding). `lengths` maps each length to how many triggers.
// include: doctor_tenant_triggers
WITH t
WHERE valueType(t.tenant_id) STARTS WITH 'STRING' AND t.status = 'pending' AND t.kind = 'semantic'
  AND valueType(t.embedding) STARTS WITH 'LIST'
WITH t.tenant_id AS tenant_id, size(t.embedding) AS length, count(*) AS triggers
ORDER BY tenant_id, triggers DESC, length
WITH tenant_id, collect({length: length, triggers: triggers}) AS lengths
WHERE size(lengths) > 1
RETURN tenant_id, lengths
ORDER BY tenant_id;

// name: doctor_copied_ids
// params: tenant_id, after, limit
// returns: element_id, label, node, holders
// mode: read
// Ids that two or more tenants use for the same label: ids are unique per
// tenant only (migration 0006), so this is allowed, but it usually means a
// seed script was copied from another tenant (check that each copy changed
// what it should). One row per (label, id), in pages of $limit after the key
// $after (label and id), holders listing each tenant and namespace; with
// $tenant_id, only ids that tenant holds.
CALL () {
  MATCH (n:Skill) RETURN n, 'Skill' AS label
  UNION ALL
  MATCH (n:Trigger) RETURN n, 'Trigger' AS label
  UNION ALL
  MATCH (n:Fact) RETURN n, 'Fact' AS label
}
WITH n, label
WHERE valueType(n.id) STARTS WITH 'STRING' AND valueType(n.tenant_id) STARTS WITH 'STRING'
  AND label + '\u001F' + n.id > $after
WITH label, n.id AS id, collect(DISTINCT n.tenant_id) AS tenants,
     collect({tenant_id: n.tenant_id, namespace: toStringOrNull(n.namespace)}) AS holders
WHERE size(tenants) > 1 AND ($tenant_id IS NULL OR $tenant_id IN tenants)
WITH label, id, holders ORDER BY label + '\u001F' + id LIMIT $limit
RETURN label + '\u001F' + id AS element_id, label, id AS node, holders;

// name: doctor_skill_cap
// params: tenant_id, max_skills, max_chars
// returns: tenant_id, namespace, skills, oversized
// mode: read
// Owning scopes with more than $max_skills skills (retracted ones and
// versions a published write replaced not counted, as writes count them), and
// skills whose label or context, or one of whose steps, is longer than
// $max_chars characters: a catalog must stay small enough to ship every turn.
// Writes refuse both; these were seeded by hand.
// include: doctor_tenant_skills
WITH s
WHERE valueType(s.tenant_id) STARTS WITH 'STRING' AND NOT s:SymfonicRetracted
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: s.tenant_id})
WITH s, c
WHERE NOT coalesce(s.symfonic_replaced_by IN c.published_writes, false)
WITH s.tenant_id AS tenant_id, toStringOrNull(s.namespace) AS namespace, count(s) AS skills,
     [x IN collect(CASE WHEN size(coalesce(toStringOrNull(s.label), '')) > $max_chars
                          OR size(coalesce(toStringOrNull(s.context), '')) > $max_chars
                          OR (valueType(s.steps) STARTS WITH 'LIST'
                              AND any(step IN s.steps WHERE size(coalesce(toStringOrNull(step), '')) > $max_chars))
                        THEN coalesce(toStringOrNull(s.id), elementId(s)) END) WHERE x IS NOT NULL][..20] AS oversized
WHERE skills > $max_skills OR size(oversized) > 0
RETURN tenant_id, namespace, skills, oversized
ORDER BY tenant_id, namespace;

// name: doctor_indexes
// params:
// returns: name, state
// mode: read
SHOW INDEXES YIELD name, state RETURN name, state;

// name: doctor_tenant_fingerprints
// params: tenants
// returns: tenant, skills, triggers, version
// mode: read
// What a turn of each tenant id in $tenants reads, as raw data for `cypher
// run` to compare before and after an operator's script: the tenant's skills
// (labels, properties, and each REQUIRES edge with its precondition, whatever
// that precondition's tenant_id), its triggers, and its catalog version. A
// tenant whose skills changed gets its catalog bumped; one whose skills or
// triggers changed gets doctor's tenant checks. Each tenant is read through
// its index.
UNWIND $tenants AS tenant
CALL (tenant) {
  MATCH (s:Skill {tenant_id: tenant})
  RETURN collect([elementId(s), labels(s), properties(s),
                  [(s)-[r:REQUIRES]->(p:Precondition) | [elementId(r), properties(r), elementId(p), properties(p)]]])
         AS skills
}
CALL (tenant) {
  MATCH (t:Trigger {tenant_id: tenant})
  RETURN collect([elementId(t), labels(t), properties(t)]) AS triggers
}
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: tenant})
RETURN tenant, skills, triggers, c.version AS version;

// name: doctor_scope_budget
// params: tenant_id, max_weight
// returns: tenant_id, namespace, weight
// mode: read
// Owning scopes whose turn reads ship more than $max_weight (the budget of
// symfonic_graph/_limits.py, computed from the graph as every write computes
// it: skill_weight, trigger_weight): such a scope's own read may not finish
// within query_timeout. Writes refuse it; these were seeded by hand.
CALL () {
  // include: doctor_tenant_skills
  WITH s
  WHERE valueType(s.tenant_id) STARTS WITH 'STRING' AND NOT s:SymfonicRetracted
  OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: s.tenant_id})
  WITH s, c
  WHERE NOT coalesce(s.symfonic_replaced_by IN c.published_writes, false)
  // include: skill_weight
  RETURN s.tenant_id AS tenant_id, toStringOrNull(s.namespace) AS namespace, weight
  UNION ALL
  // include: doctor_tenant_triggers
  WITH t
  WHERE valueType(t.tenant_id) STARTS WITH 'STRING' AND t.status = 'pending' AND NOT t:SymfonicRetracted
  // include: trigger_weight
  RETURN t.tenant_id AS tenant_id, toStringOrNull(t.namespace) AS namespace, weight
}
WITH tenant_id, namespace, sum(weight) AS weight
WHERE weight > $max_weight
RETURN tenant_id, namespace, weight
ORDER BY tenant_id, namespace;

// name: doctor_recurrences
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, recurrence, due_at, pending
// mode: read
// Triggers with a string tenant that hold a recurrence, for doctor to parse
// as the library does when an occurrence is acknowledged (Cypher has no
// RRULE parser): the rule as stored, the due time as a string, whether pending.
// include: doctor_tenant_triggers
WITH t
WHERE valueType(t.tenant_id) STARTS WITH 'STRING' AND t.recurrence IS NOT NULL
  AND elementId(t) > $after
WITH t ORDER BY elementId(t) LIMIT $limit
RETURN elementId(t) AS element_id, 'Trigger' AS label, coalesce(toStringOrNull(t.id), elementId(t)) AS node,
       t.tenant_id AS tenant_id, toStringOrNull(t.namespace) AS namespace, t.recurrence AS recurrence,
       toStringOrNull(t.due_at) AS due_at, t.status = 'pending' AS pending;

// name: doctor_trigger_wheres
// params: tenant_id, after, limit
// returns: element_id, label, node, tenant_id, namespace, where
// mode: read
// Triggers with a string tenant that hold a `where`, for doctor to compile as
// the turn does (Cypher has no CEL compiler): the expression as stored.
// include: doctor_tenant_triggers
WITH t
WHERE valueType(t.tenant_id) STARTS WITH 'STRING' AND t.where IS NOT NULL
  AND elementId(t) > $after
WITH t ORDER BY elementId(t) LIMIT $limit
RETURN elementId(t) AS element_id, 'Trigger' AS label, coalesce(toStringOrNull(t.id), elementId(t)) AS node,
       t.tenant_id AS tenant_id, toStringOrNull(t.namespace) AS namespace, t.where AS where;
