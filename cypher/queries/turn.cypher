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

// fragment: turn_cold_skills
// params:
// The skills of a turn read for the scope map `sc` (after turn_catalog):
// `packed`, the text the last library write stored, or `skills`, the rows.
// A first read (sc.packed) or a held version that moved may take the
// packed rows, when they were stored under this very version and the
// namespace holds no skill of its own (they are the tenant-wide rows; a
// scope with its own skills reads its rows, in catalog order). A re-read
// of a held version (known_version null, packed false) ships the rows.
WITH sc, version, published, skills_fresh,
     CASE WHEN skills_fresh AND (sc.packed = true OR sc.known_version IS NOT NULL) AND version IS NOT NULL
          THEN sc.tenant_id END AS packed_tenant
OPTIONAL MATCH (pc:SymfonicCatalog {tenant_id: packed_tenant})
WITH sc, version, published, skills_fresh,
     CASE WHEN pc.symfonic_packed_version = version AND valueType(pc.symfonic_packed) = 'STRING NOT NULL'
               AND NOT EXISTS { MATCH (own:Skill {tenant_id: sc.tenant_id, namespace: sc.namespace}) }
          THEN pc.symfonic_packed END AS packed
// A scope whose skills are not fresh (or come packed) must not even seek
// them: the subquery then sees a null scope, whose null tenant seeks
// nothing (a WHERE on skills_fresh is planned after the seek).
WITH sc, version, published, skills_fresh, packed,
     CASE WHEN skills_fresh AND packed IS NULL THEN sc END AS skill_scope
CALL (skill_scope, published) {
  WITH skill_scope AS sc, published
  MATCH (s:Skill)
  WHERE
    // include: skill_visible
  WITH s, published ORDER BY s.created_at, s.id
  // include: skill_packed
  RETURN collect(skill_packed) AS skills
}

// name: turn_snapshot
// params: scopes, max_triggers, now
// returns: i, version, skills_fresh, skills, packed, triggers
// mode: read
// Everything a turn reads before the model runs, in one round trip, for one
// scope or for many turns coalesced into one query: per entry of $scopes
// ({tenant_id, namespace, known_version, write_id: null, include_drafts:
// false, include_retracted: false, packed}), the tenant's catalog version, its
// visible approved skills (only when the version differs from known_version,
// or either is unusable) and the pending triggers of the scope (at most
// $max_triggers, oldest first). Skills use the one visibility rule and
// projection (skill_projection.cypher), packed as lists (`skill_packed`:
// skill_row's values without map keys, read back into skill_row's shape);
// or, for an entry with `packed: true`, as the one text the last library
// write stored (`packed`, catalog_packed_set) when it is of this version.
// Each entry is read in its own subquery, filtered by its own tenant: rows
// never cross entries. A catalog version that is not a non-negative integer
// comes back null: the skills are then read on every turn (never cached on an
// odd version).
// Entries without a turn embedding only (every `vector` null): the semantic
// triggers are then never offered, and turn_snapshot_semantic (the same
// read with them) serves a batch where some entry has one.
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  // include: turn_catalog
  // include: turn_cold_skills
  CALL (sc, published) {
    // include: offerable_text_nodes($max_triggers)
    // include: turn_triggers
  }
  RETURN version, skills_fresh, skills, packed, triggers
}
RETURN i, version, skills_fresh, skills, packed, triggers
ORDER BY i;

// name: turn_snapshot_semantic
// params: scopes, max_triggers, now
// returns: i, version, skills_fresh, skills, packed, triggers
// mode: read
// turn_snapshot for a batch where some entry carries the turn's embedding
// (`vector`): the semantic triggers scoring at least its floor are offered too.
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  // include: turn_catalog
  // include: turn_cold_skills
  CALL (sc, published) {
    // include: offerable_trigger_nodes($max_triggers)
    // include: turn_triggers
  }
  RETURN version, skills_fresh, skills, packed, triggers
}
RETURN i, version, skills_fresh, skills, packed, triggers
ORDER BY i;

// name: turn_snapshot_warm
// params: scopes, max_triggers, now
// returns: i, version, skills_fresh, skills, packed, triggers
// mode: read
// turn_snapshot for entries that all carry a known_version (the steady
// state): the same catalog and triggers, and no skills subquery at all
// (`skills` is always empty). An entry whose skills_fresh comes back true
// (its catalog moved) is read again with turn_snapshot (or
// turn_snapshot_semantic). The plan is smaller, which saves about a fifth
// of a round trip on every warm turn.
// Entries without a turn embedding only, as turn_snapshot; a batch where
// some entry has one reads turn_snapshot_warm_semantic.
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  // include: turn_catalog
  CALL (sc, published) {
    // include: offerable_text_nodes($max_triggers)
    // include: turn_triggers
  }
  RETURN version, skills_fresh, [] AS skills, null AS packed, triggers
}
RETURN i, version, skills_fresh, skills, packed, triggers
ORDER BY i;

// name: turn_snapshot_warm_semantic
// params: scopes, max_triggers, now
// returns: i, version, skills_fresh, skills, packed, triggers
// mode: read
// turn_snapshot_warm for a batch where some entry carries the turn's embedding
// (`vector`): the semantic triggers scoring at least its floor are offered too.
UNWIND range(0, size($scopes) - 1) AS i
WITH i, $scopes[i] AS sc
CALL (sc) {
  // include: turn_catalog
  CALL (sc, published) {
    // include: offerable_trigger_nodes($max_triggers)
    // include: turn_triggers
  }
  RETURN version, skills_fresh, [] AS skills, null AS packed, triggers
}
RETURN i, version, skills_fresh, skills, packed, triggers
ORDER BY i;
