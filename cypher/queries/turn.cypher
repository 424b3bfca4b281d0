// name: turn_snapshot
// params: scopes, max_triggers
// Everything a turn reads before the model runs, in one round trip, for one
// scope or for many turns coalesced into one query: per entry of $scopes
// ({tenant_id, namespace, known_version, write_id: null, include_drafts:
// false, include_retracted: false}), the tenant's catalog version, its
// visible approved skills (only when the version differs from known_version,
// or either is unusable) and the pending triggers of the scope (at most
// $max_triggers, oldest first). Skills use the one visibility rule and
// projection (skill_projection.cypher). Each entry is read in its own
// subquery, filtered by its own tenant: rows never cross entries. A catalog
// version that is not a non-negative integer comes back null: the skills are
// then read on every turn (never cached on an odd version).
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: sc.tenant_id})
  WITH sc,
       CASE
         WHEN c IS NULL THEN 0
         WHEN valueType(c.version) STARTS WITH 'INTEGER' AND c.version >= 0 THEN c.version
       END AS version,
       coalesce(c.published_writes, []) AS published
  WITH sc, version, published,
       version IS NULL OR sc.known_version IS NULL OR version <> sc.known_version AS skills_fresh
  // A warm turn (skills not fresh) must not even seek the tenant's skills: the
  // subquery then sees a null scope, whose null tenant seeks nothing (a WHERE
  // on skills_fresh is planned after the seek).
  WITH sc, version, published, skills_fresh, CASE WHEN skills_fresh THEN sc END AS skill_scope
  CALL (skill_scope, published) {
    WITH skill_scope AS sc, published
    MATCH (s:Skill)
    WHERE
      // include: skill_visible
    WITH s, published ORDER BY s.created_at, s.id
    // include: skill_row
    RETURN collect(skill_row) AS skills
  }
  CALL (sc, published) {
    OPTIONAL MATCH (t:Trigger)
    WHERE t.tenant_id = sc.tenant_id
      AND t.status = 'pending'
      AND (t.namespace IS NULL OR t.namespace = sc.namespace)
      AND NOT coalesce(t.symfonic_replaced_by IN published, false)
      AND NOT t:SymfonicRetracted
      AND (NOT t:SymfonicUnpublished
           OR (coalesce(t.namespace, '') + '\u001F' + t.symfonic_write_id) IN published)
    WITH t ORDER BY t.created_at, t.id LIMIT $max_triggers
    RETURN collect(t {.id, .tenant_id, .namespace, .condition, .task, .status,
                      created_at: toStringOrNull(t.created_at)}) AS triggers
  }
  RETURN version, skills_fresh, skills, triggers
}
RETURN i, version, skills_fresh, skills, triggers
ORDER BY i;
