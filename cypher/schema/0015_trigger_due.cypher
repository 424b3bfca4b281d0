// name: trigger_due_index
// params:
// Delivery without a user turn (TriggerDispatcher, `triggers due`) lists the
// time reminders of a whole tenant that became due: a seek on (tenant,
// status, kind, offer key <= now) reads the tenant's pending time triggers
// whose offer key has passed, never its text or event triggers, its
// reminders due later, or another tenant's.
CREATE INDEX trigger_due IF NOT EXISTS FOR (t:Trigger) ON (t.tenant_id, t.status, t.kind, t.symfonic_offer_at);
