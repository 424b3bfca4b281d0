// name: trigger_offer_index
// params:
// A turn reads only the triggers it may offer now: every trigger holds an
// offer key, `symfonic_offer_at` (the latest of its created_at, due_at and
// snoozed_until; label :SymfonicOfferKeyed), indexed after its scope key and
// status, so a seek on (scope key, 'pending', offer key <= now) skips the
// reminders not yet due or snoozed however many a scope holds. Existing
// triggers get the key from `GraphMemoryStore.stamp_keys`, which
// `apply_schema` runs after the migrations; until then they are read from
// the tenant index (see docs/prospective.md).
CREATE INDEX trigger_offer IF NOT EXISTS FOR (t:Trigger) ON (t.symfonic_scope, t.status, t.symfonic_offer_at);

// name: trigger_expiry_index
// params:
// Expired reminders still pending are found without a scan (doctor's
// expired_triggers check).
CREATE INDEX trigger_expiry IF NOT EXISTS FOR (t:Trigger) ON (t.expires_at);
