// fragment: scope_unpublished
// params: tenant_id, namespace
// The nodes of exactly the scope ($tenant_id, $namespace) that carry
// :SymfonicUnpublished (skills, triggers and facts: the nodes a staged write
// writes), as `n`, each once. By index seeks: a namespace's skills by
// (tenant_id, namespace) (migration 0013), the tenant-wide scope's skills and
// the triggers and facts by the tenant index. A scan of the label read every
// staged node of every tenant, for each scope of a publish: a seed file of 50
// namespaces of 2,000 read 100,000 nodes 150 times.
CALL () {
  MATCH (n:Skill {tenant_id: $tenant_id, namespace: $namespace})
  USING INDEX n:Skill(tenant_id, namespace)
  WHERE n:SymfonicUnpublished
  RETURN n
  UNION
  MATCH (n:Skill {tenant_id: CASE WHEN $namespace IS NULL THEN $tenant_id END})
  WHERE n.namespace IS NULL AND n:SymfonicUnpublished
  RETURN n
  UNION
  MATCH (n:Trigger {tenant_id: $tenant_id})
  WHERE n:SymfonicUnpublished AND
    // include: node_owned(n)
  RETURN n
  UNION
  MATCH (n:Fact {tenant_id: $tenant_id})
  WHERE n:SymfonicUnpublished AND
    // include: node_owned(n)
  RETURN n
}

// name: write_mark_replaced_batch
// params: tenant_id, namespace, write_id, limit
// returns: marked
// mode: write
// Publish, first, in transactions of its own: at most $limit live nodes that
// a staged node of the write re-seeds (the holder of its base key, of the
// same tenant and scope) get `symfonic_replaced_by` = the write's entry, the
// one property by which readers hide a replaced node; returns how many.
// Invariant: a transaction that lists an entry on the catalog
// (write_publish_listed) changes nothing the visibility rule reads; every
// node the entry hides was marked, and committed, before. Neo4j applies a
// committed transaction's records one at a time while readers read without
// locks, so a reader could read the list with the new entry and then a node
// the same transaction marked, still unmarked: the old and the new version
// together. Hides nothing yet (the entry is not listed) and moves no key: a
// live re-seed meanwhile still writes the live node, which the flip then
// replaces. write_prepare_batch counts a node it finds unmarked (`unmarked`)
// and the flip is then retried after marking again.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, coalesce($namespace, '') + '\u001F' + $write_id AS entry
WHERE NOT entry IN published
// include: scope_unpublished
WITH n, entry
WHERE n.symfonic_write_id = $write_id AND n.symfonic_published_at IS NULL AND n.symfonic_base_key IS NOT NULL
CALL (n, entry) {
  WITH n, entry WHERE n:Skill
  MATCH (old:Skill {symfonic_key: n.symfonic_base_key})
  WHERE old.tenant_id = n.tenant_id
    AND NOT coalesce(old.symfonic_replaced_by = entry, false)
    AND
    // include: same_namespace(old, n)
  RETURN old
  UNION
  WITH n, entry WHERE n:Trigger
  MATCH (old:Trigger {symfonic_key: n.symfonic_base_key})
  WHERE old.tenant_id = n.tenant_id
    AND NOT coalesce(old.symfonic_replaced_by = entry, false)
    AND
    // include: same_namespace(old, n)
  RETURN old
}
WITH old, entry LIMIT $limit
SET old.symfonic_replaced_by = entry
RETURN count(old) AS marked;

// name: write_prepare_batch
// params: tenant_id, namespace, write_id, limit
// returns: prepared, replaced, unmarked
// mode: write
// Publish, before the flip, at most $limit nodes at a time: a staged node
// re-seeding a key takes it over from the live node of the same tenant and
// scope (which is marked replaced by this write, its key moved aside), and
// every staged node of the write is stamped published. Nothing here changes
// what a reader sees: readers hide a replaced node and show a staged one only
// once the write's entry is on the catalog's list (write_publish_listed).
// Only what was staged in exactly this scope, and not yet listed. `unmarked`
// counts the replaced nodes that write_mark_replaced_batch had not marked
// before this statement: the flip, which lists the entry in the same
// transaction, must find none (see write_mark_replaced_batch).
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, coalesce($namespace, '') + '\u001F' + $write_id AS entry
WHERE NOT entry IN published
// include: scope_unpublished
WITH n, entry
WHERE n.symfonic_write_id = $write_id AND n.symfonic_published_at IS NULL
WITH n, entry LIMIT $limit
CALL (n, entry) {
  WITH n, entry WHERE n:Skill AND n.symfonic_base_key IS NOT NULL
  OPTIONAL MATCH (old:Skill {symfonic_key: n.symfonic_base_key})
  WHERE old.tenant_id = n.tenant_id
    AND
    // include: same_namespace(old, n)
  WITH old, entry, coalesce(old.symfonic_replaced_by = entry, false) AS marked
  SET old.symfonic_replaced_by = entry,
      old.symfonic_key = old.symfonic_key + '\u0000replaced:' + old.id
  RETURN count(old) AS skills, count(CASE WHEN old IS NOT NULL AND NOT marked THEN 1 END) AS skills_unmarked
}
CALL (n, entry) {
  WITH n, entry WHERE n:Trigger AND n.symfonic_base_key IS NOT NULL
  OPTIONAL MATCH (old:Trigger {symfonic_key: n.symfonic_base_key})
  WHERE old.tenant_id = n.tenant_id
    AND
    // include: same_namespace(old, n)
  WITH old, entry, coalesce(old.symfonic_replaced_by = entry, false) AS marked
  SET old.symfonic_replaced_by = entry,
      old.symfonic_key = old.symfonic_key + '\u0000replaced:' + old.id
  RETURN count(old) AS triggers, count(CASE WHEN old IS NOT NULL AND NOT marked THEN 1 END) AS triggers_unmarked
}
SET n.symfonic_key = coalesce(n.symfonic_base_key, n.symfonic_key), n.symfonic_base_key = null,
    n.symfonic_published_at = datetime()
RETURN count(n) AS prepared, sum(skills + triggers) AS replaced,
       sum(skills_unmarked + triggers_unmarked) AS unmarked;

// name: write_publish_listed
// params: tenant_id, namespace, write_id
// returns: published
// mode: write
// Publish, the flip: one append to the tenant's catalog node (its
// `published_writes`, one "<namespace>\u001F<write_id>" entry) makes every
// node of the write visible at once, and hides every node it replaces (each
// marked by an earlier transaction: write_mark_replaced_batch). It writes no
// other node, so it stays small whatever the size of the write
// (write_prepare_batch did the rest before). Returns how many nodes it lists;
// none (and no entry) when the write holds nothing or is listed already.
MERGE (c:SymfonicCatalog {tenant_id: $tenant_id})
ON CREATE SET c.version = 0
WITH c, coalesce(c.published_writes, []) AS published, coalesce($namespace, '') + '\u001F' + $write_id AS entry
CALL (published, entry) {
  WITH published, entry WHERE NOT entry IN published
  // include: scope_unpublished
  WITH n WHERE n.symfonic_write_id = $write_id
  RETURN count(n) AS count
}
WITH c, published, entry, count, CASE WHEN count > 0 THEN [entry] ELSE [] END AS entries
SET c.published_writes = published + entries,
    c.published_at_ms = coalesce(c.published_at_ms, []) + [e IN entries | datetime().epochMillis]
RETURN count AS published;

// name: write_fold_batch
// params: tenant_id, settle_seconds, limit
// returns: due, folded, removed
// mode: write
// Fold, at most $limit nodes of each kind at a time: the writes published
// longer than the settle period ago lose their :SymfonicUnpublished label,
// and the nodes they replaced are deleted (a skill with its preconditions of
// the same tenant). Readers see the same either way: a listed node is visible
// with or without the label, and a replaced node is hidden until deleted.
// Returns the due entries (write_unlist drops them once nothing is left).
MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, coalesce(c.published_at_ms, []) AS times,
     datetime().epochMillis - toInteger($settle_seconds * 1000) AS cutoff
WITH [i IN range(0, size(published) - 1) WHERE times[i] <= cutoff | published[i]] AS due
CALL (due) {
  OPTIONAL MATCH (n:SymfonicUnpublished)
  WHERE n.tenant_id = $tenant_id
    AND (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN due
  WITH n LIMIT $limit
  REMOVE n:SymfonicUnpublished
  RETURN count(n) AS folded
}
CALL (due) {
  OPTIONAL MATCH (old:Skill)
  WHERE old.tenant_id = $tenant_id AND old.symfonic_replaced_by IN due
  WITH old LIMIT $limit
  CALL (old) {
    OPTIONAL MATCH (old)-[:REQUIRES]->(p:Precondition)
    WHERE p.tenant_id = old.tenant_id
    DETACH DELETE p
  }
  DETACH DELETE old
  RETURN count(old) AS removed
}
CALL (due) {
  OPTIONAL MATCH (old:Trigger)
  WHERE old.tenant_id = $tenant_id AND old.symfonic_replaced_by IN due
  WITH old LIMIT $limit
  DETACH DELETE old
  RETURN count(old) AS removed_triggers
}
RETURN due, folded, removed + removed_triggers AS removed;

// name: write_discard_batch
// params: tenant_id, namespace, write_id, limit
// returns: discarded
// mode: write
// Discard, at most $limit staged nodes at a time: delete the nodes of a
// staged, unlisted write of exactly this scope (and a staged skill's
// preconditions of the same tenant). Runs after catalog_lock, so a racing
// publish either listed the write first (nothing is discarded) or finds
// nothing left to list.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
// include: scope_unpublished
WITH n, published
WHERE n.symfonic_write_id = $write_id
  AND NOT (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN published
WITH n LIMIT $limit
CALL (n) {
  OPTIONAL MATCH (n)-[:REQUIRES]->(p:Precondition)
  WHERE p.tenant_id = n.tenant_id
  DETACH DELETE p
}
DETACH DELETE n
RETURN count(*) AS discarded;

// name: write_unprepare_batch
// params: tenant_id, namespace, write_id, limit
// returns: restored
// mode: write
// Discard, after write_discard_batch removed the staged nodes: the live
// nodes a publish cut short had marked replaced by this unlisted write get
// their key back (when write_prepare_batch had moved it; a node only marked
// by write_mark_replaced_batch still holds it) and stay live, as if the
// publish never started.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, coalesce($namespace, '') + '\u001F' + $write_id AS entry
WHERE NOT entry IN published
CALL (entry) {
  MATCH (old:Skill)
  WHERE old.tenant_id = $tenant_id AND old.symfonic_replaced_by = entry
  RETURN old
  UNION
  MATCH (old:Trigger)
  WHERE old.tenant_id = $tenant_id AND old.symfonic_replaced_by = entry
  RETURN old
}
WITH old LIMIT $limit
SET old.symfonic_key = CASE WHEN old.symfonic_key ENDS WITH '\u0000replaced:' + old.id
                           THEN left(old.symfonic_key, size(old.symfonic_key) - size('\u0000replaced:' + old.id))
                           ELSE old.symfonic_key END,
    old.symfonic_replaced_by = null
RETURN count(old) AS restored;

// name: write_staged_count
// params: tenant_id, namespace, write_id
// returns: staged
// mode: read
// How many nodes are staged, unlisted, under a write id in exactly this scope.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
CALL (published) {
  // include: scope_unpublished
  WITH n, published
  WHERE n.symfonic_write_id = $write_id
    AND NOT (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN published
  RETURN count(n) AS staged
}
RETURN staged;

// name: skills_owned_after_staging
// params: tenant_id, namespace, write_id
// returns: skills, weight
// mode: read
// skills_owned_count once a staged write is published: a live skill or
// trigger that a staged one of the write replaces counts once, not twice (a
// batched re-seed of a full scope fits), and unlisted nodes of other writes
// not at all. Run again inside publish's flip, it checks the scope as it
// will be read.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, $write_id AS wid
// include: scope_load
;
