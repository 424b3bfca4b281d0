// Seed: pending prospective triggers for tenants "acme" and "globex".
//
// A :Trigger is a reminder: when its `condition` holds for a turn, its `task`
// is offered to the prompt. It stays pending until the deployment resolves
// it (status 'resolved', resolved_at set). Tenant-wide triggers have
// namespace null; namespaced ones belong to one end user of the tenant.
//
// Run it with `symfonic-graph cypher run cypher/seeds/02_triggers.cypher` (one
// transaction). Idempotent and per tenant: MERGE on (tenant_id, id);
// created_at is kept on re-runs.

// acme, only for end user "user-7".
MERGE (t:Trigger {tenant_id: 'acme', id: 'seed-acme-invoice'})
SET t.namespace = 'user-7',
    t.condition = 'the user mentions their invoice',
    t.task = 'Tell the user that invoice 4711 is overdue.',
    t.status = 'pending', t.resolved_at = null,
    t.created_at = coalesce(t.created_at, datetime('2026-01-01T00:00:00Z'));

// acme, every end user of the tenant.
MERGE (t:Trigger {tenant_id: 'acme', id: 'seed-acme-maintenance'})
SET t.namespace = null,
    t.condition = 'the user asks about downtime',
    t.task = 'Mention the maintenance window on Sunday 02:00 UTC.',
    t.status = 'pending', t.resolved_at = null,
    t.created_at = coalesce(t.created_at, datetime('2026-01-01T00:00:01Z'));

// globex, tenant-wide.
MERGE (t:Trigger {tenant_id: 'globex', id: 'seed-globex-renewal'})
SET t.namespace = null,
    t.condition = 'the user mentions renewal',
    t.task = 'Offer the annual renewal discount.',
    t.status = 'pending', t.resolved_at = null,
    t.created_at = coalesce(t.created_at, datetime('2026-01-01T00:00:00Z'));
