// fragment: trigger_scope_of
// params:
// The scope key trigger `t` should hold (an expression): tenant_id + U+001F +
// (namespace or ''), or null when its tenant_id is not a string or its
// namespace is neither null nor a string (no scope sees such a trigger).
CASE WHEN valueType(t.tenant_id) STARTS WITH 'STRING'
          AND (t.namespace IS NULL OR valueType(t.namespace) STARTS WITH 'STRING')
     THEN t.tenant_id + '\u001F' + coalesce(t.namespace, '') END

// name: stamp_trigger_scopes
// params: batch
// returns: stamped
// mode: write
// Give at most $batch triggers that lack them (seeded with plain Cypher, or
// written by an older release) or hold a stale one (a plain-Cypher `SET
// t.namespace` or `SET t.due_at`) their scope key and offer key
// (trigger_offer_at) and the :SymfonicScoped and :SymfonicOfferKeyed labels;
// returns how many. Run until it returns less than $batch
// (GraphMemoryStore.stamp_keys).
MATCH (t:Trigger)
WITH t,
  // include: trigger_scope_of
  AS scope_key,
  // include: trigger_offer_at(t)
  AS offer_at
WHERE NOT t:SymfonicScoped OR NOT t:SymfonicOfferKeyed
   OR NOT coalesce(t.symfonic_scope = scope_key, t.symfonic_scope IS NULL AND scope_key IS NULL)
   OR NOT coalesce(t.symfonic_offer_at = offer_at, false)
WITH t, scope_key, offer_at LIMIT $batch
SET t.symfonic_scope = scope_key, t.symfonic_offer_at = offer_at, t:SymfonicScoped:SymfonicOfferKeyed
RETURN count(t) AS stamped;

// name: stamp_tenant_groups
// params:
// returns: tenant_id, tokens, untokened
// mode: read
// Per string tenant id of the skills, triggers and facts: the distinct
// tenant tokens its nodes hold and how many have none (:SymfonicTokened
// missing). stamp_keys compares the tokens with the one it computes.
CALL () {
  MATCH (n:Skill) RETURN n
  UNION ALL
  MATCH (n:Trigger) RETURN n
  UNION ALL
  MATCH (n:Fact) RETURN n
}
WITH n WHERE valueType(n.tenant_id) STARTS WITH 'STRING'
RETURN n.tenant_id AS tenant_id, collect(DISTINCT toStringOrNull(n.symfonic_tenant_token)) AS tokens,
       count(CASE WHEN NOT n:SymfonicTokened THEN 1 END) AS untokened;

// name: stamp_tenant_tokens
// params: tokens, batch
// returns: stamped
// mode: write
// Give at most $batch skills, triggers and facts of the tenants of $tokens
// ([{tenant_id, token}]) that lack it, or hold another, their tenant's token
// and the :SymfonicTokened label; returns how many.
UNWIND $tokens AS p
CALL (p) {
  MATCH (n:Skill {tenant_id: p.tenant_id}) RETURN n
  UNION ALL
  MATCH (n:Trigger {tenant_id: p.tenant_id}) RETURN n
  UNION ALL
  MATCH (n:Fact {tenant_id: p.tenant_id}) RETURN n
}
WITH n, p WHERE NOT n:SymfonicTokened OR NOT coalesce(n.symfonic_tenant_token = p.token, false)
WITH n, p LIMIT $batch
SET n.symfonic_tenant_token = p.token, n:SymfonicTokened
RETURN count(n) AS stamped;

// name: stamp_untenanted_tokens
// params: batch
// returns: stamped
// mode: write
// Skills, triggers and facts whose tenant_id is not a string belong to no
// tenant: they get the label without a token, so they do not keep recall on
// its fallback for unstamped nodes. Returns how many.
CALL () {
  MATCH (n:Skill) RETURN n
  UNION ALL
  MATCH (n:Trigger) RETURN n
  UNION ALL
  MATCH (n:Fact) RETURN n
}
WITH n WHERE NOT n:SymfonicTokened AND NOT valueType(n.tenant_id) STARTS WITH 'STRING'
WITH n LIMIT $batch
SET n:SymfonicTokened
REMOVE n.symfonic_tenant_token
RETURN count(n) AS stamped;
