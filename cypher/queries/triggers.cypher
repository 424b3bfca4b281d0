// name: triggers_write
// params: rows
// returns: ids
// mode: write
// Store reminders as pending triggers; staged when the row has a write_id.
// A row whose key exists (same identifier in the same scope) replaces that
// trigger's condition and task (same id) and makes it pending again.
// One result row holds every id, in row order.
UNWIND range(0, size($rows) - 1) AS seq
WITH $rows[seq] AS row, seq
MERGE (t:Trigger {symfonic_key: row.key})
ON CREATE SET t.id = row.id, t.created_at = datetime() + duration({microseconds: seq})
// A live row landing on a published, not yet folded write's node keeps it on
// the catalog's list (as skills_write does): readers see one version.
WITH t, row, seq,
     row.write_id IS NULL AND t:SymfonicUnpublished AND t.symfonic_published_at IS NOT NULL AS listed,
     t.symfonic_series IS NOT NULL AND row.write_id IS NULL AS was_series
SET t.tenant_id = row.tenant_id, t.namespace = row.namespace, t.identifier = row.identifier,
    t.condition = row.condition, t.task = row.task, t.status = 'pending', t.resolved_at = null,
    t.kind = coalesce(row.kind, 'text'),
    t.due_at = CASE WHEN row.due_at IS NULL THEN null ELSE datetime({epochMillis: row.due_at}) END,
    t.expires_at = CASE WHEN row.expires_at IS NULL THEN null ELSE datetime({epochMillis: row.expires_at}) END,
    t.snoozed_until = null, t.resolution = null, t.recurrence = row.recurrence,
    t.on_tool = row.on_tool, t.same_args = row.same_args, t.where = row.where, t.once = row.once,
    t.embedding = row.embedding,
    t.symfonic_series = CASE WHEN row.recurrence IS NULL THEN null ELSE coalesce(row.base_key, row.key) END,
    t.symfonic_generation = CASE WHEN row.recurrence IS NULL THEN null
                                 ELSE coalesce(t.symfonic_generation, -1) + 1 END,
    t.symfonic_occurrence = CASE WHEN row.recurrence IS NULL THEN null ELSE 0 END,
    t.symfonic_series_start = CASE WHEN row.recurrence IS NULL OR row.due_at IS NULL THEN null
                                   ELSE datetime({epochMillis: row.due_at}) END,
    t.updated_at = datetime(), t.symfonic_base_key = row.base_key,
    t.symfonic_scope = row.tenant_id + '\u001F' + coalesce(row.namespace, ''),
    t.symfonic_tenant_token = row.tenant_token, t:SymfonicScoped:SymfonicTokened:SymfonicOfferKeyed,
    t.symfonic_write_id = CASE WHEN listed THEN t.symfonic_write_id ELSE row.write_id END
REMOVE t:SymfonicRetracted, t:SymfonicUnpublished
FOREACH (_ IN CASE WHEN row.write_id IS NULL AND NOT listed THEN [] ELSE [1] END | SET t:SymfonicUnpublished)
SET t.symfonic_offer_at =
  // include: trigger_offer_at(t)
// Setting a recurring trigger again (its identifier) starts its series over:
// the later occurrences still pending are retired (resolution 'replaced').
WITH t, seq, was_series
CALL (t, was_series) {
  WITH t WHERE was_series
  MATCH (o:Trigger {symfonic_scope: t.symfonic_scope, status: 'pending'})
  USING INDEX o:Trigger(symfonic_scope, status)
  WHERE o.symfonic_series = t.symfonic_key AND o <> t
  SET o.status = 'resolved', o.resolution = 'replaced', o.resolved_at = datetime()
}
WITH seq, t ORDER BY seq
RETURN collect(t.id) AS ids;

// fragment: scope_keys(sc)
// params:
// The scope keys (symfonic_scope) the scope map `sc` reads (an expression):
// the tenant-wide key, and the namespace's own when it has one.
CASE WHEN sc.namespace IS NULL THEN [sc.tenant_id + '\u001F']
     ELSE [sc.tenant_id + '\u001F', sc.tenant_id + '\u001F' + sc.namespace] END

// fragment: pending_trigger_nodes
// params:
// Rows `t`: the pending triggers the scope map `sc` may see, found by scope
// key (migration 0007): one seek for the tenant-wide key and one for the
// namespace's own, so other namespaces' triggers are never touched. Only
// when some trigger has no key yet (seeded with plain Cypher; the count store
// answers in O(1)) are the tenant's unkeyed triggers read too, from the tenant
// index (hinted: on some statistics the planner preferred a scan of every
// unkeyed trigger of the database, `Trigger&!SymfonicScoped`). A key is a hint, never the authority: the including query keeps the
// tenant, namespace, status and marker filters, so a stale key (a plain-Cypher
// `SET t.namespace`) can hide a trigger but never show it to another scope.
CALL (sc) {
  UNWIND
    // include: scope_keys(sc)
    AS scope_key
  MATCH (t:Trigger {symfonic_scope: scope_key, status: 'pending'})
  USING INDEX t:Trigger(symfonic_scope, status)
  RETURN t
  UNION
  WITH sc, CASE WHEN COUNT { (:Trigger) } <> COUNT { (:SymfonicScoped) } THEN sc.tenant_id END AS unkeyed_tenant
  MATCH (t:Trigger)
  USING INDEX t:Trigger(tenant_id)
  WHERE t.tenant_id = unkeyed_tenant AND NOT t:SymfonicScoped
  RETURN t
}

// fragment: trigger_offer_at(t)
// params:
// The offer key of trigger `t` (an expression): the latest of its
// `created_at`, `due_at` and `snoozed_until` that are zoned datetimes, else
// the epoch: when it became offerable, the order a turn reads in. Kept in
// `symfonic_offer_at` by every write (label :SymfonicOfferKeyed) and by
// stamp_keys, indexed with the scope key and status (migration 0011), so a
// turn seeks only triggers whose offer key has passed. A semantic trigger is
// offered by meaning, never in this order: its key is the end of time, so
// the time-ordered seeks never read it (a turn without an embedding pays
// nothing for a scope's semantic triggers) and only the semantic read, by
// kind, finds it. A hint, never the authority: the turn's filter
// (trigger_offerable) reads due_at, snoozed_until and expires_at themselves.
CASE WHEN t.kind = 'semantic' THEN datetime('9999-12-31T00:00:00Z')
     ELSE reduce(at = datetime({epochMillis: 0}), x IN [t.created_at, t.due_at, t.snoozed_until] |
                 CASE WHEN valueType(x) STARTS WITH 'ZONED DATETIME' AND x > at THEN x ELSE at END)
END

// fragment: trigger_similarity(t)
// params:
// The score of semantic trigger `t` against the turn's embedding
// `sc.vector` (an expression), as Neo4j's cosine ((1 + cos) / 2), or null:
// not semantic, no embedding in the turn, or an embedding the similarity
// function would raise on (not a list of numbers, another length, a squared
// norm out of the float32 range or all zeros: a hand-seeded one). Each test
// is its own CASE branch, evaluated in order, so none runs on a value an
// earlier one refused. doctor reports the same embeddings.
CASE WHEN sc.vector IS NULL OR NOT coalesce(t.kind = 'semantic', false) THEN null
     WHEN NOT
       // include: embedding_numbers(t)
       THEN null
     WHEN size(t.embedding) <> size(sc.vector) THEN null
     WHEN NOT
       // include: embedding_norm_usable(t)
       THEN null
     ELSE vector.similarity.cosine(t.embedding, sc.vector)
END

// fragment: embedding_numbers(t)
// params:
// Whether trigger `t`'s embedding is a list of numbers without nulls (an
// expression): what the similarity function and the vector index take.
coalesce(valueType(t.embedding) IN ['LIST<FLOAT NOT NULL> NOT NULL', 'LIST<INTEGER NOT NULL> NOT NULL'], false)

// fragment: embedding_norm_usable(t)
// params:
// Whether trigger `t`'s embedding, a list of numbers (embedding_numbers),
// has a squared norm the similarity function takes (an expression): not
// empty, not all zeros, every component within float32. The library checks
// the same bounds when it writes one (shape/_embedding.py).
(1e-12 < reduce(sq = 0.0, x IN t.embedding | sq + toFloat(x) * toFloat(x)) < 1e36)

// fragment: index_answer_complete(hits, k)
// params:
// Whether `hits`, a vector index answer of at most `k` nodes ({t, score},
// nearest first), holds every node scoring at least `sc.similarity_floor`
// (an expression): it came back short, or reached nodes under the floor.
(size(hits) < k OR any(h IN hits WHERE h.score < sc.similarity_floor))

// fragment: trigger_keep(cap)
// params:
// Of the offerable rows `t` (with their `similarity`), the `cap` a turn keeps: due time triggers and
// semantic ones that matched first, then the others, each offerable longest
// first (offer key, then creation); shown oldest first (created_at, then id).
WITH t, similarity ORDER BY CASE WHEN t.kind IN ['time', 'semantic'] THEN 0 ELSE 1 END, coalesce(t.symfonic_offer_at, t.created_at),
                t.created_at, t.id
     LIMIT cap
WITH t, similarity ORDER BY t.created_at, t.id

// fragment: offerable_trigger_nodes(cap)
// params:
// Rows `t, similarity`: the triggers of the scope map `sc` (with
// `published`, the tenant catalog's list) that may be offered at $now, at
// most `cap` per scope key, and the semantic ones with their score:
// one index seek per scope key on the offer index of migration 0011, in
// offer-key order, filtered (trigger_visible, trigger_offerable) and cut at
// `cap`, so a scope's reminders not yet due, snoozed, or beyond the first
// `cap` are never read; when that seek is full, a second one on the offer
// index with the kind (migration 0016) for the first `cap` due time
// triggers, so the including query can keep them ahead of older text ones
// (at most 2 x `cap` rows per scope key, and only over the cap). Triggers without an offer key yet (seeded with plain
// Cypher, written by an older release; the count store tells in O(1)) are
// read from the tenant index, as pending_trigger_nodes reads unkeyed ones.
// The including query filters again and orders.
// This is offerable_keyed_nodes and semantic_trigger_nodes in one subquery.
CALL (sc, published) {
  // include: offerable_keyed_nodes(cap)
  UNION
  // include: semantic_trigger_nodes
}

// fragment: offerable_text_nodes(cap)
// params:
// offerable_trigger_nodes for a read that holds no turn embedding (every
// entry's `sc.vector` null): without the semantic branch, which then finds
// nothing and whose operators cost about a tenth of a warm turn read's
// server time; the rows are the same.
CALL (sc, published) {
  // include: offerable_keyed_nodes(cap)
}

// fragment: offerable_keyed_nodes(cap)
// params: now
// The rows `t, similarity` of offerable_trigger_nodes found by the offer
// index (and, for triggers without an offer key yet, the tenant index): a
// UNION body, spliced inside a `CALL (sc, published) { ... }`.
UNWIND
  // include: scope_keys(sc)
  AS scope_key
CALL (sc, published, scope_key) {
  MATCH (t:Trigger)
  USING INDEX t:Trigger(symfonic_scope, status, symfonic_offer_at)
  WHERE t.symfonic_scope = scope_key AND t.status = 'pending' AND t.symfonic_offer_at <= $now
    AND
    // include: trigger_visible
    AND
    // include: trigger_offerable(null)
  WITH t ORDER BY t.symfonic_scope, t.status, t.symfonic_offer_at LIMIT cap
  RETURN t
}
WITH sc, published, scope_key, collect(t) AS first
// Only a full first seek may have left due time triggers behind: then (and
// only then: a null key seeks nothing) the first `cap` of them.
CALL (sc, published, scope_key, first) {
  WITH sc, published, CASE WHEN size(first) >= cap THEN scope_key END AS time_key
  MATCH (t:Trigger)
  USING INDEX t:Trigger(symfonic_scope, status, kind, symfonic_offer_at)
  WHERE t.symfonic_scope = time_key AND t.status = 'pending' AND t.kind = 'time' AND t.symfonic_offer_at <= $now
    AND
    // include: trigger_visible
    AND
    // include: trigger_offerable(null)
  WITH t ORDER BY t.symfonic_scope, t.status, t.kind, t.symfonic_offer_at LIMIT cap
  RETURN collect(t) AS timed
}
UNWIND first + [x IN timed WHERE NOT x IN first] AS t
RETURN t, null AS similarity
UNION
WITH sc, CASE WHEN COUNT { (:Trigger) } <> COUNT { (:SymfonicOfferKeyed) } THEN sc.tenant_id END AS unkeyed_tenant
MATCH (t:Trigger)
USING INDEX t:Trigger(tenant_id)
WHERE t.tenant_id = unkeyed_tenant AND NOT t:SymfonicOfferKeyed
RETURN t,
  // include: trigger_similarity(t)
  AS similarity

// fragment: semantic_trigger_nodes
// params:
// The semantic rows `t, similarity` of offerable_trigger_nodes: a UNION
// body, spliced inside a `CALL (sc, published) { ... }`.
// Semantic triggers, only for an entry with the turn's embedding
// (`sc.vector`). A scope holding at most `sc.semantic_exact` pending ones
// (counted on the kind index of migration 0016) scores them all exactly:
// cheaper than an index search, and no other tenant's vectors are touched.
// A bigger one asks the vector index (migration 0017) for the first
// `sc.semantic_k` nodes by score, kept when the including query's filters
// hold (the scope's tenant and namespace among them). Neo4j 5's index
// search cannot filter by tenant, so the read checks it left nothing out:
// when every hit scores at least the floor, other tenants' or resolved
// triggers may have pushed some of the scope's own beyond `semantic_k`;
// it asks again for ten times as many, and if those too all reach the
// floor, the scope is scored exactly instead. Whether a trigger is offered
// never depends on another tenant's triggers; only the cost of the rare
// exact read of a big scope does, and only on the scope's own count
// (trigger_similarity scores it; the index holds only vectors it can
// search).
WITH sc, published WHERE sc.vector IS NOT NULL
WITH sc, published,
     // include: scope_keys(sc)
     AS keys
WITH sc, published, keys, COUNT {
  MATCH (x:Trigger)
  USING INDEX x:Trigger(symfonic_scope, status, kind, symfonic_offer_at)
  WHERE x.symfonic_scope IN keys AND x.status = 'pending' AND x.kind = 'semantic'
    AND x.symfonic_offer_at IS NOT NULL
} AS held
CALL (sc, held) {
  WITH sc WHERE held > sc.semantic_exact
  CALL db.index.vector.queryNodes('trigger_embedding', sc.semantic_k, sc.vector) YIELD node, score
  RETURN collect({t: node, score: score}) AS first
}
WITH sc, published, keys, held, first, sc.semantic_k * 10 AS wide,
     held > sc.semantic_exact AND
     // include: index_answer_complete(first, sc.semantic_k)
     AS first_complete
// A full first answer: ask again for ten times as many before scoring the
// scope exactly (crowding by more than that many is what costs the exact read).
CALL (sc, held, first_complete, wide) {
  WITH sc, wide WHERE held > sc.semantic_exact AND NOT first_complete
  CALL db.index.vector.queryNodes('trigger_embedding', wide, sc.vector) YIELD node, score
  RETURN collect({t: node, score: score}) AS wider
}
WITH sc, published, keys, CASE WHEN first_complete THEN first ELSE wider END AS hits,
     first_complete OR (held > sc.semantic_exact AND
                        // include: index_answer_complete(wider, wide)
                       ) AS complete
CALL (sc, published, keys, hits, complete) {
  UNWIND CASE WHEN complete THEN hits ELSE [] END AS hit
  RETURN hit.t AS t, hit.score AS similarity
  UNION
  UNWIND CASE WHEN complete THEN [] ELSE keys END AS scope_key
  MATCH (t:Trigger)
  USING INDEX t:Trigger(symfonic_scope, status, kind, symfonic_offer_at)
  WHERE t.symfonic_scope = scope_key AND t.status = 'pending' AND t.kind = 'semantic'
    AND t.symfonic_offer_at IS NOT NULL
  RETURN t,
    // include: trigger_similarity(t)
    AS similarity
}
RETURN t, similarity

// name: triggers_offerable
// params: tenant_id, namespace, write_id, limit, now, vector, similarity_floor, semantic_k, semantic_exact
// returns: triggers
// mode: read
// The triggers the scope may be offered at $now (trigger_offerable: text
// triggers pending, time triggers due; none expired or snoozed), oldest
// first, at most $limit, in one row; with $vector (the turn's embedding), the
// semantic triggers scoring at least $similarity_floor too.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     {tenant_id: $tenant_id, namespace: $namespace, write_id: $write_id, vector: $vector,
      similarity_floor: $similarity_floor, semantic_k: $semantic_k, semantic_exact: $semantic_exact} AS sc
// include: offerable_trigger_nodes($limit)
WITH t, similarity, published, sc
WHERE
  // include: trigger_visible
  AND
  // include: trigger_offerable(similarity)
// include: trigger_keep($limit)
// include: trigger_row
// A semantic trigger's row carries its cosine with the turn's embedding.
RETURN collect(trigger_row {.*, similarity: 2 * similarity - 1}) AS triggers;

// name: triggers_pending
// params: tenant_id, namespace, write_id, limit
// returns: triggers
// mode: read
// Unresolved triggers the scope sees, oldest first, at most $limit, in one row.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     {tenant_id: $tenant_id, namespace: $namespace, write_id: $write_id} AS sc
// include: pending_trigger_nodes
WITH t, published, sc
WHERE
  // include: trigger_visible
WITH t ORDER BY t.created_at, t.id LIMIT $limit
// include: trigger_row
RETURN collect(trigger_row) AS triggers;

// name: trigger_keys_held
// params: keys, tenant_id, namespace
// returns: key, id, tenant_id, namespace
// mode: read
// Keys of a write that a trigger of another scope holds: refused, never taken over.
UNWIND $keys AS key
MATCH (n:Trigger {symfonic_key: key})
WHERE NOT coalesce(n.tenant_id = $tenant_id AND
  // include: node_owned(n)
  , false)
RETURN key, n.id AS id, n.tenant_id AS tenant_id, n.namespace AS namespace;

// name: trigger_resolve
// params: tenant_id, namespace, trigger_id
// returns: id, tenant_id, namespace, owned
// mode: write
// Resolve a visible trigger; only the scope that owns it (exactly its
// namespace) changes it.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
MATCH (n:Trigger {id: $trigger_id})
WHERE
  // include: node_addressable(n)
WITH n AS t,
  // include: node_owned(n)
  AS owned
CALL (t, owned) {
  WITH t WHERE owned
  SET t.status = 'resolved', t.resolved_at = datetime()
}
RETURN t.id AS id, t.tenant_id AS tenant_id, t.namespace AS namespace, owned;

// fragment: trigger_target
// params: tenant_id, trigger_ref
// Rows (t, owned, candidates): the trigger a lifecycle statement (ack,
// snooze, cancel) acts on. First the tenant's trigger whose id is
// $trigger_ref; only when there is none, the pending triggers whose
// identifier it is, and only when none is pending, the newest one of that
// identifier. Only triggers the scope may address (node_addressable);
// `owned` when exactly of the scope (write authority); `candidates` counts
// the owned matches: the statement changes a trigger only when it is one.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
CALL () {
  MATCH (n:Trigger {tenant_id: $tenant_id, id: $trigger_ref}) RETURN n, 0 AS rank
  UNION
  MATCH (n:Trigger {tenant_id: $tenant_id, identifier: $trigger_ref})
  RETURN n, CASE WHEN n.status = 'pending' THEN 1 ELSE 2 END AS rank
}
WITH n, rank, published
WHERE
  // include: node_addressable(n)
WITH n, rank,
     // include: node_owned(n)
     AS owned
ORDER BY rank, n.created_at DESC, n.id
WITH collect({n: n, rank: rank, owned: owned}) AS found
WITH CASE WHEN found[0].rank = 2 THEN found[0..1] ELSE [f IN found WHERE f.rank = found[0].rank] END AS best
WITH best, size([f IN best WHERE f.owned]) AS candidates
UNWIND best AS f
WITH f.n AS t, f.owned AS owned, candidates

// name: trigger_lookup
// params: tenant_id, namespace, trigger_ref
// returns: id, owned, candidates, status, resolution, recurrence, due_at, series_start, expires_at
// mode: read
// What acknowledging the trigger $trigger_ref names needs to know before
// it runs: its recurrence and times (epoch milliseconds, null when not a
// zoned datetime), so the caller computes the next occurrence.
// include: trigger_target
RETURN t.id AS id, owned, candidates, t.status AS status, t.resolution AS resolution,
       t.recurrence AS recurrence,
       CASE WHEN valueType(t.due_at) STARTS WITH 'ZONED DATETIME' THEN t.due_at.epochMillis END AS due_at,
       CASE WHEN valueType(t.symfonic_series_start) STARTS WITH 'ZONED DATETIME'
            THEN t.symfonic_series_start.epochMillis END AS series_start,
       CASE WHEN valueType(t.expires_at) STARTS WITH 'ZONED DATETIME' THEN t.expires_at.epochMillis END AS expires_at;

// name: trigger_ack
// params: tenant_id, namespace, trigger_ref, next
// returns: id, tenant_id, namespace, owned, candidates, status, resolution, next_id
// mode: write
// Acknowledge a pending trigger (trigger_target): resolved, resolution
// 'acknowledged', never offered again. A trigger already resolved is left as
// it is (acknowledging twice changes nothing; a cancelled one stays cancelled).
// For an acknowledged recurring occurrence and a $next ({id, due_at,
// tenant_token}, computed by the caller from its RRULE), the next occurrence:
// one node per (series, generation, occurrence number), under a unique key,
// so however many acknowledgements of one occurrence race, exactly one next
// occurrence exists and each of them returns its id.
// include: trigger_target
CALL (t, owned, candidates) {
  WITH t WHERE owned AND candidates = 1 AND t.status = 'pending'
  SET t.status = 'resolved', t.resolution = 'acknowledged', t.resolved_at = datetime()
}
OPTIONAL CALL (t, owned, candidates) {
  WITH t WHERE owned AND candidates = 1 AND $next IS NOT NULL AND t.resolution = 'acknowledged'
    AND t.recurrence IS NOT NULL
  WITH t, coalesce(t.symfonic_series, t.symfonic_key, t.id) AS series, coalesce(t.symfonic_generation, 0) AS gen,
       coalesce(t.symfonic_occurrence, 0) + 1 AS number
  MERGE (n:Trigger {symfonic_key: series + '\u0000occ:' + toString(gen) + ':' + toString(number)})
  ON CREATE SET n.id = $next.id, n.created_at = datetime(), n.updated_at = datetime(),
    n.tenant_id = t.tenant_id, n.namespace = t.namespace, n.identifier = t.identifier,
    n.condition = t.condition, n.task = t.task, n.kind = t.kind, n.recurrence = t.recurrence, n.once = t.once,
    n.expires_at = t.expires_at, n.status = 'pending', n.resolved_at = null,
    n.due_at = datetime({epochMillis: $next.due_at}), n.symfonic_offer_at = datetime({epochMillis: $next.due_at}),
    n.symfonic_series = series, n.symfonic_generation = gen, n.symfonic_occurrence = number,
    n.symfonic_series_start = coalesce(t.symfonic_series_start, t.due_at),
    n.symfonic_tenant_token = $next.tenant_token,
    n.symfonic_scope =
      // include: trigger_scope_of
    , n:SymfonicScoped:SymfonicTokened:SymfonicOfferKeyed
  RETURN n.id AS next_id
}
RETURN t.id AS id, t.tenant_id AS tenant_id, t.namespace AS namespace, owned, candidates,
       t.status AS status, t.resolution AS resolution, next_id;

// name: trigger_cancel
// params: tenant_id, namespace, trigger_ref
// returns: id, tenant_id, namespace, owned, candidates, status, resolution
// mode: write
// Cancel a pending trigger (trigger_target): resolved, resolution
// 'cancelled', never offered again, and a recurring one makes no next
// occurrence. A trigger already resolved is left as it is.
// include: trigger_target
CALL (t, owned, candidates) {
  WITH t WHERE owned AND candidates = 1 AND t.status = 'pending'
  SET t.status = 'resolved', t.resolution = 'cancelled', t.resolved_at = datetime()
}
RETURN t.id AS id, t.tenant_id AS tenant_id, t.namespace AS namespace, owned, candidates,
       t.status AS status, t.resolution AS resolution;

// name: trigger_snooze
// params: tenant_id, namespace, trigger_ref, until
// returns: id, tenant_id, namespace, owned, candidates, status, resolution
// mode: write
// Snooze a pending trigger (trigger_target) until $until: not offered before
// it, whatever its kind; then as before. Its offer key follows (when it has
// one; an unkeyed trigger gets it from stamp_keys).
// include: trigger_target
CALL (t, owned, candidates) {
  WITH t WHERE owned AND candidates = 1 AND t.status = 'pending'
  SET t.snoozed_until = $until, t.updated_at = datetime()
  WITH t WHERE t:SymfonicOfferKeyed
  SET t.symfonic_offer_at =
    // include: trigger_offer_at(t)
}
RETURN t.id AS id, t.tenant_id AS tenant_id, t.namespace AS namespace, owned, candidates,
       t.status AS status, t.resolution AS resolution;

// name: triggers_done
// params: tenant_id, namespace, limit
// returns: triggers
// mode: read
// The scope's resolved triggers (acknowledged, cancelled, replaced, or
// resolved by hand), most recently resolved first, at most $limit, in one
// row: history, never offered. One seek per scope key on (symfonic_scope,
// status); triggers without a scope key are read from the tenant index.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     {tenant_id: $tenant_id, namespace: $namespace, write_id: null} AS sc
CALL (sc) {
  UNWIND
    // include: scope_keys(sc)
    AS scope_key
  MATCH (t:Trigger {symfonic_scope: scope_key, status: 'resolved'})
  USING INDEX t:Trigger(symfonic_scope, status)
  RETURN t
  UNION
  WITH sc, CASE WHEN COUNT { (:Trigger) } <> COUNT { (:SymfonicScoped) } THEN sc.tenant_id END AS unkeyed_tenant
  MATCH (t:Trigger)
  USING INDEX t:Trigger(tenant_id)
  WHERE t.tenant_id = unkeyed_tenant AND NOT t:SymfonicScoped
  RETURN t
}
WITH t, published, sc
WHERE t.tenant_id = sc.tenant_id
  AND t.status = 'resolved'
  AND (t.namespace IS NULL OR t.namespace = sc.namespace)
  AND NOT t:SymfonicRetracted
  AND
  // include: visible_version(t, sc.write_id)
WITH t ORDER BY t.resolved_at DESC, t.id LIMIT $limit
// include: trigger_row
RETURN collect(trigger_row) AS triggers;

// name: triggers_claim_once
// params: tenant_id, namespace, ids
// returns: id
// mode: write
// Acknowledge the `once` triggers of $ids a turn selected (resolution
// 'acknowledged'): the ids returned are those this statement moved from
// pending, the only ones the turn may offer. The write lock is taken first
// (a throwaway property) and the status read again under it, so when turns
// race for one trigger exactly one of them gets its id back.
UNWIND $ids AS trigger_id
MATCH (t:Trigger {tenant_id: $tenant_id, id: trigger_id})
WHERE t.once = true AND t.status = 'pending' AND (t.namespace IS NULL OR t.namespace = $namespace)
  AND NOT t:SymfonicRetracted
SET t.symfonic_claim_lock = true
REMOVE t.symfonic_claim_lock
WITH t
WHERE t.status = 'pending'
SET t.status = 'resolved', t.resolution = 'acknowledged', t.resolved_at = datetime()
RETURN t.id AS id;
