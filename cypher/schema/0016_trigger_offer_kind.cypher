// name: trigger_offer_kind_index
// params:
// A turn over max_triggers keeps its due time reminders ahead of older text
// ones: beside the seek on the offer index (every kind, offer-key order), it
// seeks (scope key, 'pending', 'time', offer key <= now) for the scope's due
// time triggers, in offer-key order and cut at the cap, so they are read
// however many older text or event triggers the scope holds.
CREATE INDEX trigger_offer_kind IF NOT EXISTS FOR (t:Trigger) ON (t.symfonic_scope, t.status, t.kind, t.symfonic_offer_at);
