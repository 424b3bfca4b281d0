// name: skills_write
// params: rows
// returns: ids
// mode: write
// Write skills with their preconditions in one statement. A row whose key
// already exists replaces that skill (same id), its old preconditions removed.
// The skill and its new preconditions share `symfonic_rev` ("<uuid>/<count>")
// so that a reader racing this write can tell a torn skill and read again.
// A row's `enforcement` (shadow, enforce) is set with the skill, so a shadow
// rule never runs enforced; a row without one keeps the skill's mode.
// A batch keeps its order: each new skill's created_at is one microsecond
// after the previous row's, so a catalog lists a file's rules in file order.
// One result row holds every id, in row order: a row per skill would cost the
// client more than the write itself.
UNWIND range(0, size($rows) - 1) AS seq
WITH $rows[seq] AS row, seq
MERGE (s:Skill {symfonic_key: row.key})
ON CREATE SET s.id = row.id, s.created_at = datetime() + duration({microseconds: seq})
// A live row landing on a published write's node (published, not yet folded)
// keeps that node on the catalog's list: a reader holding the list from
// before the publish still sees the old version, never both.
WITH s, row, seq,
     row.write_id IS NULL AND s:SymfonicUnpublished AND s.symfonic_published_at IS NOT NULL AS listed
SET s.tenant_id = row.tenant_id,
    s.namespace = row.namespace,
    s.label = row.label,
    s.identifier = row.identifier,
    s.steps = row.steps,
    s.action_tool = row.action_tool,
    s.context = row.context,
    s.status = row.status,
    s.active = true,
    s.source = row.source,
    s.enforcement = coalesce(row.enforcement, s.enforcement),
    s.updated_at = datetime(),
    s.symfonic_write_id = CASE WHEN listed THEN s.symfonic_write_id ELSE row.write_id END,
    s.symfonic_base_key = row.base_key,
    s.symfonic_rev = row.rev,
    s.symfonic_tenant_token = row.tenant_token, s:SymfonicTokened
REMOVE s:SymfonicRetracted, s:SymfonicUnpublished
FOREACH (_ IN CASE WHEN row.write_id IS NULL AND NOT listed THEN [] ELSE [1] END | SET s:SymfonicUnpublished)
WITH s, row, seq
CALL (s) {
  MATCH (s)-[:REQUIRES]->(old:Precondition)
  WHERE old.tenant_id = s.tenant_id
  DETACH DELETE old
}
CALL (s, row) {
  UNWIND row.preconditions AS p
  CREATE (s)-[:REQUIRES {position: p.position}]->(n:Precondition)
  SET n.tenant_id = row.tenant_id, n.namespace = row.namespace, n.kind = p.kind,
      n.tool = p.tool, n.same_args = p.same_args, n.within = p.within, n.tools = p.tools,
      n.path = p.path, n.op = p.op, n.value = p.value, n.if_missing = p.if_missing, n.text = p.text,
      n.same_args_from = p.same_args_from, n.where = p.where, n.latest = p.latest, n.voided_by = p.voided_by,
      n.message = p.message, n.alternatives = p.alternatives, n.max_calls = p.max_calls, n.max_sum = p.max_sum,
      n.sum = p.sum, n.per = p.per, n.window = p.window,
      n.symfonic_rev = row.rev
}
WITH seq, s ORDER BY seq
RETURN collect(s.id) AS ids;

// name: skill_written
// params: key
// returns: skill_row
// mode: read
// The skill a write just wrote, read by its key in the write's own
// transaction: what seed_authored_skill and propose_skill return. A publish
// or a re-seed that commits right after the write can no longer hide the
// skill from its own writer (a later read would find it replaced).
MATCH (s:Skill {symfonic_key: $key})
// include: skill_row
RETURN skill_row;

// name: skill_keys_held
// params: keys, tenant_id, namespace
// returns: key, id, tenant_id, namespace
// mode: read
// Keys of a write that an existing skill of another scope holds (for example
// a key copied by hand onto another tenant's node). The write refuses them:
// a write never takes over a node whose tenant or namespace differs.
UNWIND $keys AS key
MATCH (n:Skill {symfonic_key: key})
WHERE NOT coalesce(n.tenant_id = $tenant_id AND
  // include: node_owned(n)
  , false)
RETURN key, n.id AS id, n.tenant_id AS tenant_id, n.namespace AS namespace;

// fragment: skill_weight
// params:
// The weight of skill `s` in its scope's budget (symfonic_graph/_limits.py), as
// `weight`: the characters of its shipped text (label, steps, action tool,
// context, ids) and of its preconditions' values, each node counting 1,024
// more (a node costs a read, and the compile after it, as much as that much
// text). Values of any type count by their string form; lists by their items.
CALL (s) {
  OPTIONAL MATCH (s)-[:REQUIRES]->(p:Precondition)
  WITH s, p
  WITH s, sum(CASE WHEN p IS NULL THEN 0 ELSE
           1024 + reduce(n = 0, x IN [p.tool, p.path, p.op, p.text] | n + coalesce(size(toStringOrNull(x)), 0))
           + reduce(n = 0, x IN CASE WHEN valueType(p.tools) STARTS WITH 'LIST' THEN p.tools ELSE [p.tools] END
                    | n + 1 + coalesce(size(toStringOrNull(x)), 0))
           + reduce(n = 0, x IN CASE WHEN valueType(p.value) STARTS WITH 'LIST' THEN p.value ELSE [p.value] END
                    | n + 1 + coalesce(size(toStringOrNull(x)), 0))
           + reduce(n = 0, x IN CASE WHEN valueType(p.same_args) STARTS WITH 'LIST' THEN p.same_args
                                     ELSE [p.same_args] END
                    | n + 1 + coalesce(size(toStringOrNull(x)), 0)) END) AS pre
  RETURN 1024 + pre + reduce(n = 0, x IN [s.id, s.label, s.identifier, s.action_tool, s.context, s.source]
                             | n + coalesce(size(toStringOrNull(x)), 0))
         + reduce(n = 0, x IN CASE WHEN valueType(s.steps) STARTS WITH 'LIST' THEN s.steps ELSE [s.steps] END
                  | n + 1 + coalesce(size(toStringOrNull(x)), 0)) AS weight
}

// fragment: trigger_weight
// params:
// The weight of pending trigger `t` in its scope's budget, as `weight`: its
// condition, task and id, plus 1,024.
WITH *, 1024 + reduce(n = 0, x IN [t.id, t.condition, t.task] | n + coalesce(size(toStringOrNull(x)), 0)) AS weight

// fragment: scope_load
// params: tenant_id, namespace
// What a scope owns that its turn reads will ship once the write in progress
// (write id `wid`, null for a live write) is visible, with `published` the
// tenant catalog's list: `skills` counted, and `weight` (skill_weight,
// trigger_weight) of its skills (drafts included) and pending triggers.
// Retracted nodes, versions a published write replaced, versions this write
// replaces and unlisted staged nodes of other writes (abandoned or not yet
// published) do not count.
CALL (published, wid) {
  // The scope's skills by a seek on (tenant_id, namespace) (migration 0013, hinted:
  // a server with many tenants planned the tenant index alone, reading the whole tenant),
  // the tenant-wide scope's by the tenant index: never the other namespaces'.
  // The two branches are node_owned(s): a null $namespace seeks nothing in the
  // first, a non-null one nothing in the second.
  CALL () {
    MATCH (s:Skill {tenant_id: $tenant_id, namespace: $namespace})
    USING INDEX s:Skill(tenant_id, namespace)
    RETURN s
    UNION ALL
    MATCH (s:Skill {tenant_id: CASE WHEN $namespace IS NULL THEN $tenant_id END})
    WHERE s.namespace IS NULL
    RETURN s
  }
  WITH s, published, wid
  WHERE NOT s:SymfonicRetracted
    AND NOT coalesce(s.symfonic_replaced_by = coalesce($namespace, '') + '\u001F' + wid, false)
    AND
    // include: visible_version(s, wid)
    AND NOT EXISTS { MATCH (:Skill {symfonic_key: s.symfonic_key + '\u0000staged:' + wid}) }
  // include: skill_weight
  RETURN count(s) AS skills, sum(weight) AS skill_weight
}
CALL (published, wid) {
  MATCH (t:Trigger {tenant_id: $tenant_id})
  WHERE
    // include: node_owned(t)
    AND t.status = 'pending' AND NOT t:SymfonicRetracted
    AND NOT coalesce(t.symfonic_replaced_by = coalesce($namespace, '') + '\u001F' + wid, false)
    AND
    // include: visible_version(t, wid)
    AND NOT EXISTS { MATCH (:Trigger {symfonic_key: t.symfonic_key + '\u0000staged:' + wid}) }
  // include: trigger_weight
  RETURN sum(weight) AS trigger_weight
}
RETURN skills, skill_weight + trigger_weight AS weight

// name: skills_owned_count
// params: tenant_id, namespace
// returns: skills, weight
// mode: read
// How many skills the scope owns and the weight of what its turn reads ship
// (scope_load), read inside a write to refuse one that would take the scope
// over its cap or its budget (symfonic_graph/_limits.py): a catalog must stay
// small enough to ship every turn.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, null AS wid
// include: scope_load
;

// name: skills_visible
// params: tenant_id, namespace, write_id, include_drafts, include_retracted, query, limit
// returns: skills
// mode: read
// Skills the scope sees, with their preconditions in position order, in a
// stable order (created_at, id): the one visibility rule and projection
// (skill_projection.cypher). A staged node is visible once its write is
// listed on the tenant's catalog node (read once, first, so a published batch
// appears all at once). One row holds them all, in that order: streaming a
// row per skill costs the async driver about 35 us each, more than the query.
WITH {tenant_id: $tenant_id, namespace: $namespace, write_id: $write_id, include_drafts: $include_drafts,
      include_retracted: $include_retracted} AS sc
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: sc.tenant_id})
WITH sc, coalesce(c.published_writes, []) AS published
MATCH (s:Skill)
WHERE
  // include: skill_visible
  AND ($query = '' OR toLower(toStringOrNull(s.label)) CONTAINS toLower($query)
       OR toLower(toStringOrNull(s.context)) CONTAINS toLower($query))
WITH s ORDER BY s.created_at, s.id LIMIT $limit
// include: skill_row
RETURN collect(skill_row) AS skills;

// name: skill_by_id
// params: tenant_id, namespace, write_id, skill_id
// returns: skill_row
// mode: read
// One skill by id (drafts and retracted ones included), if the scope sees it.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
MATCH (s:Skill {id: $skill_id})
WHERE s.tenant_id = $tenant_id
  AND (s.namespace IS NULL OR s.namespace = $namespace)
  AND
  // include: visible_version(s, $write_id)
// include: skill_row
RETURN skill_row;

// name: skills_evidence
// params: tenant_id, ids
// returns: id, support, confidence, failures_without, examples
// mode: read
// The evidence a mined rule carries (`propose_mined`: support, confidence,
// failures_without, examples) for skills a scoped read already listed, by id
// (`skills list`): an index seek on (tenant_id, id) each. A skill without
// evidence gives no row.
UNWIND $ids AS id
MATCH (s:Skill {tenant_id: $tenant_id, id: id})
WHERE s.support IS NOT NULL OR s.confidence IS NOT NULL OR s.failures_without IS NOT NULL
   OR s.examples IS NOT NULL
RETURN s.id AS id, s.support AS support, s.confidence AS confidence, s.failures_without AS failures_without,
       s.examples AS examples;

// name: skill_set_status
// params: tenant_id, namespace, skill_id, status
// returns: id, tenant_id, namespace, owned
// mode: write
// Approve or reject a visible, published skill; only the scope that owns it
// (exactly its namespace) changes it.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
MATCH (n:Skill {id: $skill_id})
WHERE
  // include: node_addressable(n)
WITH n AS s,
  // include: node_owned(n)
  AS owned
CALL (s, owned) {
  WITH s WHERE owned
  SET s.status = $status, s.updated_at = datetime()
}
RETURN s.id AS id, s.tenant_id AS tenant_id, s.namespace AS namespace, owned;

// name: skill_draft_key_held
// params: tenant_id, namespace, skill_id
// returns: key, id, tenant_id, namespace
// mode: read
// Approve, before step 2: the identifier key a draft would take over, when a
// skill of another scope holds it (for example a key copied by hand onto
// another tenant's node). Approve refuses then: it never takes over, or
// collides with, another scope's node.
MATCH (s:Skill {id: $skill_id})
WHERE s.tenant_id = $tenant_id
  AND
  // include: node_owned(s)
  AND s.symfonic_base_key IS NOT NULL AND s.symfonic_write_id IS NULL
MATCH (n:Skill {symfonic_key: s.symfonic_base_key})
WHERE NOT coalesce(n.tenant_id = $tenant_id AND
  // include: node_owned(n)
  , false)
RETURN n.symfonic_key AS key, n.id AS id, n.tenant_id AS tenant_id, n.namespace AS namespace;

// name: skill_take_key
// params: tenant_id, namespace, skill_id
// returns: id
// mode: write
// Approve, step 2 (same transaction): a draft proposed for an identifier that
// already has a live skill takes over its key; the live skill (of the same
// tenant only) and its preconditions of the same tenant are deleted.
MATCH (s:Skill {id: $skill_id})
WHERE s.tenant_id = $tenant_id
  AND
  // include: node_owned(s)
  AND s.status = 'approved' AND s.symfonic_base_key IS NOT NULL AND s.symfonic_write_id IS NULL
OPTIONAL MATCH (old:Skill {symfonic_key: s.symfonic_base_key})
WHERE old.tenant_id = s.tenant_id
  AND
  // include: same_namespace(old, s)
CALL (old) {
  OPTIONAL MATCH (old)-[:REQUIRES]->(p:Precondition)
  WHERE p.tenant_id = old.tenant_id
  DETACH DELETE p
}
DETACH DELETE old
SET s.symfonic_key = s.symfonic_base_key, s.symfonic_base_key = null
RETURN s.id AS id;

// name: catalog_bump
// params: tenant_id
// returns: version
// mode: write
// Bump the tenant's catalog version after any write that changes its skills.
MERGE (c:SymfonicCatalog {tenant_id: $tenant_id})
ON CREATE SET c.version = 0
// A version that is not a non-negative integer (hand-written), or that
// cannot grow (the largest integer), restarts from the clock in
// milliseconds: readers compare versions for equality only.
SET c.version = CASE WHEN valueType(c.version) STARTS WITH 'INTEGER' AND 0 <= c.version < 9223372036854775807
                     THEN c.version + 1 ELSE timestamp() END
RETURN c.version AS version;

// name: catalog_packed_lock
// params: tenants
// returns: tenant_id
// mode: write
// catalog_lock for packing, for each of $tenants in the order given (the
// one lock order: sorted), without MERGE: a catalog erased meanwhile is not
// created again (no row for it: nothing to pack).
UNWIND $tenants AS tenant_id
MATCH (c:SymfonicCatalog {tenant_id: tenant_id})
SET c.symfonic_locked_at = datetime()
RETURN c.tenant_id AS tenant_id;

// name: catalog_packed_rows
// params: tenants
// returns: tenant_id, version, skills
// mode: read
// Run after every write that locks or bumps catalogs, under their locks
// (catalog_packed_lock): per tenant of $tenants, the catalog version and
// the tenant-wide skills a turn of the tenant sees, packed as turn_snapshot
// ships them (the one visibility rule and projection), in the same order.
// The write stores them as JSON text with catalog_packed_set.
UNWIND $tenants AS tenant_id
MATCH (c:SymfonicCatalog {tenant_id: tenant_id})
WITH {tenant_id: tenant_id, namespace: null, write_id: null, include_drafts: false,
      include_retracted: false} AS sc,
     CASE WHEN valueType(c.version) STARTS WITH 'INTEGER' AND c.version >= 0 THEN c.version END AS version,
     coalesce(c.published_writes, []) AS published
CALL (sc, published) {
  MATCH (s:Skill)
  WHERE
    // include: skill_visible
  WITH s, published ORDER BY s.created_at, s.id
  // include: skill_packed
  RETURN collect(skill_packed) AS skills
}
RETURN sc.tenant_id AS tenant_id, version, skills;

// name: catalog_packed_set
// params: rows
// returns: stored
// mode: write
// Keep the packed tenant-wide rows of catalog_packed_rows on each catalog
// node ($rows: {tenant_id, version, packed}; `symfonic_packed`: JSON text
// `[version, rows]`) with the version they were read under
// (`symfonic_packed_version`); a null `packed` removes both. A plain-Cypher
// bump leaves the two versions apart, and turns then read the rows
// themselves until the next library write.
UNWIND $rows AS row
MATCH (c:SymfonicCatalog {tenant_id: row.tenant_id})
SET c.symfonic_packed = row.packed,
    c.symfonic_packed_version = CASE WHEN row.packed IS NULL THEN null ELSE row.version END
RETURN count(c) AS stored;

// name: catalog_version
// params: tenant_id
// returns: version
// mode: read
// The version, or null when it is not a non-negative integer.
MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
RETURN CASE WHEN valueType(c.version) STARTS WITH 'INTEGER' AND c.version >= 0 THEN c.version END AS version;

// name: skill_set_enforcement
// params: tenant_id, namespace, skill_id, enforcement
// returns: id, tenant_id, namespace, owned
// mode: write
// Shadow or enforce a visible, published skill (`enforcement` = "shadow" or
// "enforce"); only the scope that owns it (exactly its namespace) changes it.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
MATCH (n:Skill {id: $skill_id})
WHERE
  // include: node_addressable(n)
WITH n AS s,
  // include: node_owned(n)
  AS owned
CALL (s, owned) {
  WITH s WHERE owned
  SET s.enforcement = $enforcement, s.updated_at = datetime()
}
RETURN s.id AS id, s.tenant_id AS tenant_id, s.namespace AS namespace, owned;

// name: mined_drafts_write
// params: rows, tenant_id, namespace
// returns: identifier, outcome, ids, statuses
// mode: write
// Write mined rules as drafts, one per identifier ("mined:<action>:<precondition>")
// in exactly this scope. No skill of that identifier yet: create the draft with
// its precondition and evidence. An open draft (not retracted): update its
// evidence. Any other status (approved, rejected) or a retracted draft: leave
// it as it is, so mining again never duplicates, resurrects or demotes a rule.
UNWIND $rows AS row
OPTIONAL MATCH (old:Skill {tenant_id: $tenant_id, identifier: row.identifier})
WHERE
  // include: node_owned(old)
WITH row, collect(old) AS found
CALL (row, found) {
  WITH row, found WHERE size(found) = 0
  CREATE (s:Skill {symfonic_key: row.key})
  SET s.id = row.id, s.created_at = datetime(), s.tenant_id = row.tenant_id, s.namespace = row.namespace,
      s.label = row.label, s.identifier = row.identifier, s.steps = row.steps, s.action_tool = row.action_tool,
      s.context = row.context, s.status = 'draft', s.active = true, s.source = row.source,
      s.updated_at = datetime(), s.symfonic_rev = row.rev,
      s.symfonic_tenant_token = row.tenant_token, s:SymfonicTokened,
      s.support = row.support, s.confidence = row.confidence, s.failures_without = row.failures_without,
      s.examples = row.examples
  WITH s, row
  UNWIND row.preconditions AS p
  CREATE (s)-[:REQUIRES {position: p.position}]->(n:Precondition)
  SET n.tenant_id = row.tenant_id, n.namespace = row.namespace, n.kind = p.kind,
      n.tool = p.tool, n.same_args = p.same_args, n.within = p.within, n.tools = p.tools,
      n.path = p.path, n.op = p.op, n.value = p.value, n.if_missing = p.if_missing, n.text = p.text,
      n.same_args_from = p.same_args_from, n.where = p.where, n.latest = p.latest, n.voided_by = p.voided_by,
      n.message = p.message, n.alternatives = p.alternatives, n.max_calls = p.max_calls, n.max_sum = p.max_sum,
      n.sum = p.sum, n.per = p.per, n.window = p.window,
      n.symfonic_rev = row.rev
}
CALL (row, found) {
  UNWIND found AS d
  WITH d, row WHERE d.status = 'draft' AND NOT d:SymfonicRetracted
  SET d.support = row.support, d.confidence = row.confidence, d.failures_without = row.failures_without,
      d.examples = row.examples, d.updated_at = datetime()
}
RETURN row.identifier AS identifier,
       CASE WHEN size(found) = 0 THEN 'created'
            WHEN any(d IN found WHERE d.status = 'draft' AND NOT d:SymfonicRetracted) THEN 'updated'
            ELSE 'kept' END AS outcome,
       CASE WHEN size(found) = 0 THEN [row.id] ELSE [d IN found | d.id] END AS ids,
       [d IN found | CASE WHEN d:SymfonicRetracted THEN 'retracted' ELSE d.status END] AS statuses;
