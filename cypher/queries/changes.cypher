// name: change_record_skill
// params: tenant_id, namespace, skill_id, change, field, default_from, to, actor, reason
// returns: recorded
// mode: write
// The record of one change to a skill's `status` or `enforcement` ($field),
// run in the change's own transaction just before it: `from` is the value the
// change replaces. Only a skill the scope owns is recorded; when the change
// itself then refuses (not found, another scope's), the transaction rolls
// back and the record with it.
MATCH (s:Skill {tenant_id: $tenant_id, id: $skill_id})
WHERE
  // include: node_owned(s)
CREATE (:SymfonicChange {
  tenant_id: $tenant_id, namespace: $namespace, target_id: s.id, identifier: s.identifier,
  at: datetime(), actor: $actor, reason: $reason, change: $change,
  from: coalesce(s[$field], $default_from), to: $to
})
RETURN count(*) AS recorded;

// name: change_record_marker
// params: tenant_id, namespace, node_id, change, to, actor, reason
// returns: recorded
// mode: write
// The record of a retract or restore, run in its transaction just before it,
// on the node the marker statement will change (see `marker_target`): `from`
// is "retracted" or "live" as the node is now.
// include: marker_target
WITH n, owned, candidates WHERE owned AND candidates = 1
CREATE (:SymfonicChange {
  tenant_id: $tenant_id, namespace: $namespace, target_id: n.id, identifier: n.identifier,
  at: datetime(), actor: $actor, reason: $reason, change: $change,
  from: CASE WHEN n:SymfonicRetracted THEN 'retracted' ELSE 'live' END, to: $to
})
RETURN count(*) AS recorded;

// name: change_history
// params: tenant_id, namespace, target
// returns: at, actor, reason, change, from, to, target_id, identifier
// mode: read
// The recorded changes of one node of exactly this scope, by its id or its
// identifier, oldest first. Seeks the tenant (index change_tenant).
MATCH (c:SymfonicChange {tenant_id: $tenant_id})
WHERE (c.target_id = $target OR c.identifier = $target)
  AND
  // include: node_owned(c)
RETURN toString(c.at) AS at, c.actor AS actor, c.reason AS reason, c.change AS change,
       c.from AS from, c.to AS to, c.target_id AS target_id, c.identifier AS identifier
ORDER BY c.at, c.target_id;

// name: erasure_receipt
// params: tenant_id, namespace, counts, actor, reason
// returns: at
// mode: write
// The receipt of one finished erase: who, why, when and how many nodes per
// label (`counts`, a JSON object). No erase ever deletes a receipt.
CREATE (e:SymfonicErasure {tenant_id: $tenant_id, namespace: $namespace, counts: $counts,
                           at: datetime(), actor: $actor, reason: $reason})
RETURN toString(e.at) AS at;

// name: erasures_list
// params: tenant_id
// returns: tenant_id, namespace, counts, at, actor, reason
// mode: read
// Erasure receipts, oldest first: one tenant's (index erasure_tenant) or, with
// a null $tenant_id, every tenant's.
// The second branch is a label scan its filter keeps from starting when a
// tenant is given, so one tenant's list costs what the tenant holds.
CALL () {
  MATCH (e:SymfonicErasure {tenant_id: $tenant_id})
  RETURN e
  UNION ALL
  WITH 1 AS every_tenant WHERE $tenant_id IS NULL
  MATCH (e:SymfonicErasure)
  RETURN e
}
RETURN e.tenant_id AS tenant_id, e.namespace AS namespace, e.counts AS counts, toString(e.at) AS at,
       e.actor AS actor, e.reason AS reason
ORDER BY e.at;

// name: change_record_publish
// params: tenant_id, namespace, write_id, actor, reason
// returns: recorded
// mode: write
// The record of a publish, run in the flip's transaction just before
// `write_publish_listed`, under the write id as its target: only when the flip
// will list the write (it holds unpublished nodes of the scope, not listed yet).
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published, coalesce($namespace, '') + '\u001F' + $write_id AS entry
CALL (published, entry) {
  WITH published, entry WHERE NOT entry IN published
  // include: scope_unpublished
  WITH n WHERE n.symfonic_write_id = $write_id
  RETURN count(n) AS staged
}
WITH staged WHERE staged > 0
CREATE (:SymfonicChange {
  tenant_id: $tenant_id, namespace: $namespace, target_id: $write_id, identifier: null,
  at: datetime(), actor: $actor, reason: $reason, change: 'publish', from: 'staged', to: 'published'
})
RETURN count(*) AS recorded;

// name: change_record_seed
// params: tenant_id, namespace, rows, actor, reason
// returns: recorded
// mode: write
// The records of a live seed of one scope, one row per skill entry of the file
// ({key, id, identifier, status, enforcement, digest}), run in the seed's
// transaction before `skills_write` and the checks that may refuse the seed
// (the records roll back with it): a skill the file creates is
// recorded `create` (absent -> its mode), one whose content it replaces (or
// that it brings back from retracted) `replace` (old mode or retracted -> new
// mode), one whose mode alone it changes `shadow` or `enforce` (old -> new
// mode, as the lifecycle commands record it); an unchanged skill records
// nothing. Content is compared by the digest the library stamped on the skill
// (`symfonic_rev`, see shape/_revision.py) and its status. One UNWIND seeking
// each key (unique constraint on symfonic_key): bounded for a large file.
UNWIND $rows AS row
OPTIONAL MATCH (s:Skill {symfonic_key: row.key})
WHERE s.tenant_id = $tenant_id
WITH row, s,
     CASE WHEN s IS NULL THEN null
          WHEN coalesce(s.active, true) = true AND NOT s:SymfonicRetracted THEN coalesce(s.enforcement, 'enforce')
          ELSE 'retracted' END AS old,
     coalesce(row.enforcement, s.enforcement, 'enforce') AS new,
     CASE WHEN split(coalesce(s.symfonic_rev, ''), '/')[0] CONTAINS ':'
          THEN split(split(s.symfonic_rev, '/')[0], ':')[1] END AS stamped
WITH row, s, old, new,
     CASE WHEN old IS NULL THEN 'create'
          WHEN old = 'retracted' THEN 'replace'
          WHEN stamped IS NULL OR stamped <> row.digest OR coalesce(s.status, '') <> coalesce(row.status, '') THEN 'replace'
          WHEN old <> new THEN new
     END AS change
WHERE change IS NOT NULL
CREATE (:SymfonicChange {
  tenant_id: $tenant_id, namespace: $namespace, target_id: coalesce(s.id, row.id), identifier: row.identifier,
  at: datetime(), actor: $actor, reason: $reason, change: change, from: coalesce(old, 'absent'), to: new
})
RETURN count(*) AS recorded;
