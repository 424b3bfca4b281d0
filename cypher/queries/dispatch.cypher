// fragment: trigger_deliverable
// params: now
// A WHERE body over trigger `t` (with `published` and the scope map `sc`
// bound): a time trigger of the tenant that a dispatcher may hand out at
// $now. Pending, not retracted, live or of a published write, due, not
// snoozed, not expired, and not yet delivered for its current offer key (a
// snooze or a new due time makes it deliverable again).
t.tenant_id = sc.tenant_id
  AND t.status = 'pending'
  AND t.kind = 'time'
  AND NOT t:SymfonicRetracted
  AND
  // include: visible_version(t, sc.write_id)
  AND coalesce(t.due_at <= $now, false)
  AND coalesce(NOT t.snoozed_until > $now, true)
  AND coalesce(NOT t.expires_at <= $now, true)
  AND coalesce(t.symfonic_delivered_for <>
      // include: trigger_offer_at(t)
    , true)

// name: triggers_due
// params: tenant_id, namespace, all_namespaces, now, limit
// returns: triggers
// mode: read
// The time triggers that became due at $now and were not delivered yet,
// longest due first (offer key, then id), at most $limit, in one row. With
// $all_namespaces, every end user's of the tenant and the tenant-wide ones:
// one seek on the due index (migration 0015) for the tenant, pending, time,
// offer key <= $now. Else those the scope ($namespace) sees, one seek per
// scope key on the offer index (migration 0011). Triggers without an offer
// key yet are read from the tenant index.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     {tenant_id: $tenant_id, namespace: $namespace, write_id: null} AS sc
CALL (sc, published) {
  WITH sc, published WHERE $all_namespaces
  MATCH (t:Trigger)
  USING INDEX t:Trigger(tenant_id, status, kind, symfonic_offer_at)
  WHERE t.tenant_id = $tenant_id AND t.status = 'pending' AND t.kind = 'time' AND t.symfonic_offer_at <= $now
    AND
    // include: trigger_deliverable
  WITH t ORDER BY t.tenant_id, t.status, t.kind, t.symfonic_offer_at LIMIT $limit
  RETURN t
  UNION
  WITH sc, published WHERE NOT $all_namespaces
  UNWIND
    // include: scope_keys(sc)
    AS scope_key
  CALL (sc, published, scope_key) {
    MATCH (t:Trigger)
    USING INDEX t:Trigger(symfonic_scope, status, symfonic_offer_at)
    WHERE t.symfonic_scope = scope_key AND t.status = 'pending' AND t.symfonic_offer_at <= $now
      AND t.kind = 'time' AND (t.namespace IS NULL OR t.namespace = sc.namespace)
      AND
      // include: trigger_deliverable
    WITH t ORDER BY t.symfonic_scope, t.status, t.symfonic_offer_at LIMIT $limit
    RETURN t
  }
  RETURN t
  UNION
  WITH sc, published, CASE WHEN COUNT { (:Trigger) } <> COUNT { (:SymfonicOfferKeyed) } THEN sc.tenant_id END
       AS unkeyed_tenant
  MATCH (t:Trigger)
  USING INDEX t:Trigger(tenant_id)
  WHERE t.tenant_id = unkeyed_tenant AND NOT t:SymfonicOfferKeyed
    AND ($all_namespaces OR t.namespace IS NULL OR t.namespace = sc.namespace)
    AND
    // include: trigger_deliverable
  RETURN t
}
WITH DISTINCT t
WITH t,
     // include: trigger_offer_at(t)
     AS offer
ORDER BY offer, t.id LIMIT $limit
// include: trigger_row
RETURN collect(trigger_row) AS triggers;

// name: triggers_claim
// params: tenant_id, ids, token, now, until
// returns: id, claimed
// mode: write
// Claim due time triggers for delivery: one guarded write per trigger. The
// trigger's write lock is taken first (a throwaway property set and removed),
// so the check that follows reads the last committed claim: of several
// dispatchers claiming one occurrence at once, exactly one wins. A trigger
// is claimed when it is still deliverable and its claim is free, expired
// (`until` passed: its dispatcher died), for an earlier offer key, or this
// $token's own (a retried statement). `claimed` is true for the winner.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     {tenant_id: $tenant_id, namespace: null, write_id: null} AS sc
UNWIND $ids AS trigger_id
MATCH (t:Trigger {id: trigger_id})
WHERE t.tenant_id = $tenant_id
SET t.symfonic_claim_lock = true
REMOVE t.symfonic_claim_lock
WITH t, published, sc
CALL (t, published, sc) {
  WITH t, published, sc,
       // include: trigger_offer_at(t)
       AS offer
  WHERE
    // include: trigger_deliverable
    AND (t.symfonic_claim_token IS NULL OR t.symfonic_claim_token = $token OR t.symfonic_claim_until <= $now
         OR coalesce(t.symfonic_claim_for <> offer, true))
  SET t.symfonic_claim_token = $token, t.symfonic_claim_until = $until, t.symfonic_claim_for = offer
  RETURN 1 AS won
  UNION
  RETURN 0 AS won
}
WITH t, max(won) AS won
RETURN t.id AS id, won = 1 AS claimed;

// name: triggers_delivered
// params: tenant_id, ids, token
// returns: id
// mode: write
// Record the delivery of triggers this $token claimed: delivered for the
// offer key claimed (never handed out again for it), the claim cleared.
// A trigger whose claim another token holds now is left as it is.
UNWIND $ids AS trigger_id
MATCH (t:Trigger {id: trigger_id})
WHERE t.tenant_id = $tenant_id AND t.symfonic_claim_token = $token
SET t.symfonic_delivered_for = t.symfonic_claim_for, t.symfonic_delivered_at = datetime()
REMOVE t.symfonic_claim_token, t.symfonic_claim_until, t.symfonic_claim_for
RETURN t.id AS id;

// name: triggers_release
// params: tenant_id, ids, token
// returns: id
// mode: write
// Release claims this $token holds (its delivery failed): the triggers are
// deliverable again on the next round.
UNWIND $ids AS trigger_id
MATCH (t:Trigger {id: trigger_id})
WHERE t.tenant_id = $tenant_id AND t.symfonic_claim_token = $token
REMOVE t.symfonic_claim_token, t.symfonic_claim_until, t.symfonic_claim_for
RETURN t.id AS id;

// name: trigger_tenants
// params:
// returns: tenant_ids
// mode: read
// The tenants that hold triggers (a dispatcher told no tenants serves these),
// read from the trigger tenant index.
MATCH (t:Trigger)
USING INDEX t:Trigger(tenant_id)
WHERE t.tenant_id IS NOT NULL
WITH DISTINCT t.tenant_id AS tenant_id
WHERE valueType(tenant_id) STARTS WITH 'STRING'
RETURN collect(tenant_id) AS tenant_ids;
