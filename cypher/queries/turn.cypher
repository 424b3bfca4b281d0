// fragment: turn_catalog
// params:
// The tenant's catalog for the scope map `sc` (bound by the including query):
// `version` (null when it is not a non-negative integer), the list of
// `published` writes, and `skills_fresh`: whether this turn must ship the
// skills (the version differs from sc.known_version, or either is unusable).
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: sc.tenant_id})
WITH sc,
     CASE
       WHEN c IS NULL THEN 0
       WHEN valueType(c.version) STARTS WITH 'INTEGER' AND c.version >= 0 THEN c.version
     END AS version,
     coalesce(c.published_writes, []) AS published
WITH sc, version, published,
     version IS NULL OR sc.known_version IS NULL OR version <> sc.known_version AS skills_fresh

// fragment: turn_triggers
// params:
// The rows `t` of offerable_trigger_nodes (included just before, inside a
// `CALL (sc, published) { ... }` subquery that keeps the including query's
// rows) filtered to the triggers the scope `sc` sees and may be offered at
// $now, at most $max_triggers (due time triggers kept first), shown oldest
// first, as `triggers` (a semantic trigger's row with its cosine with the
// turn's embedding, `similarity`).
WITH t, similarity, published, sc
WHERE
  // include: trigger_visible
  AND
  // include: trigger_offerable(similarity)
// include: trigger_keep($max_triggers)
// include: trigger_row
RETURN collect(trigger_row {.*, similarity: 2 * similarity - 1}) AS triggers

// name: turn_snapshot
// params: scopes, max_triggers, now
// returns: i, version, skills_fresh, skills, triggers
// mode: read
// Everything a turn reads before the model runs, in one round trip, for one
// scope or for many turns coalesced into one query: per entry of $scopes
// ({tenant_id, namespace, known_version, write_id: null, include_drafts:
// false, include_retracted: false}), the tenant's catalog version, its
// visible approved skills (only when the version differs from known_version,
// or either is unusable) and the pending triggers of the scope (at most
// $max_triggers, oldest first). Skills use the one visibility rule and
// projection (skill_projection.cypher), packed as lists (`skill_packed`:
// skill_row's values without map keys, read back into skill_row's shape).
// Each entry is read in its own subquery, filtered by its own tenant: rows
// never cross entries. A catalog version that is not a non-negative integer
// comes back null: the skills are then read on every turn (never cached on an
// odd version).
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  // include: turn_catalog
  // A scope whose skills are not fresh must not even seek them: the subquery
  // then sees a null scope, whose null tenant seeks nothing (a WHERE on
  // skills_fresh is planned after the seek).
  WITH sc, version, published, skills_fresh, CASE WHEN skills_fresh THEN sc END AS skill_scope
  CALL (skill_scope, published) {
    WITH skill_scope AS sc, published
    MATCH (s:Skill)
    WHERE
      // include: skill_visible
    WITH s, published ORDER BY s.created_at, s.id
    // include: skill_packed
    RETURN collect(skill_packed) AS skills
  }
  CALL (sc, published) {
    // include: offerable_trigger_nodes($max_triggers)
    // include: turn_triggers
  }
  RETURN version, skills_fresh, skills, triggers
}
RETURN i, version, skills_fresh, skills, triggers
ORDER BY i;

// name: turn_snapshot_warm
// params: scopes, max_triggers, now
// returns: i, version, skills_fresh, skills, triggers
// mode: read
// turn_snapshot for entries that all carry a known_version (the steady
// state): the same catalog and triggers, and no skills subquery at all
// (`skills` is always empty). An entry whose skills_fresh comes back true
// (its catalog moved) is read again with turn_snapshot. The plan is smaller,
// which saves about a fifth of a round trip on every warm turn.
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  // include: turn_catalog
  CALL (sc, published) {
    // include: offerable_trigger_nodes($max_triggers)
    // include: turn_triggers
  }
  RETURN version, skills_fresh, [] AS skills, triggers
}
RETURN i, version, skills_fresh, skills, triggers
ORDER BY i;
