// Demo seed for `symfonic-graph demo`: two tenants in one database, plain
// Cypher in the documented shape, no library call and no markers.
//
// Idempotent and per tenant: every node is MERGEd on its (tenant_id, id) key,
// so a copy of this file for another tenant (only the tenant ids changed)
// writes that tenant's own nodes. Each node also gets the identifier key the
// library gives the same identifier in the same scope (symfonic_key:
// json.dumps of ["skill" | "trigger", tenant_id, namespace, identifier], built
// here from the node's tenant_id), so seeding `deliver-weekly` into acme with
// the library or a seed file replaces the one node instead of adding a second.
// Each skill is one statement (node and preconditions together), so a turn
// never reads it half written.

// A library write (a seed file, an older version of this file) may hold one
// of these identifier keys under another id: drop that node of the same
// tenant first, so that the nodes below can take the key.
UNWIND [{tenant: 'acme', id: 'demo-acme-deliver', key: '["skill", "' + 'acme' + '", null, "deliver-weekly"]'},
        {tenant: 'globex', id: 'demo-globex-refund', key: '["skill", "' + 'globex' + '", null, "refund"]'}] AS row
MATCH (old:Skill {symfonic_key: row.key})
WHERE old.tenant_id = row.tenant AND old.id <> row.id
OPTIONAL MATCH (old)-[:REQUIRES]->(p:Precondition) WHERE p.tenant_id = old.tenant_id
WITH old, collect(p) AS preconditions
FOREACH (p IN preconditions | DETACH DELETE p)
DETACH DELETE old;

UNWIND [{tenant: 'acme', id: 'demo-acme-invoice', key: '["trigger", "' + 'acme' + '", "user-7", "invoice-4711"]'},
        {tenant: 'globex', id: 'demo-globex-renewal', key: '["trigger", "' + 'globex' + '", null, "renewal-discount"]'}] AS row
MATCH (old:Trigger {symfonic_key: row.key})
WHERE old.tenant_id = row.tenant AND old.id <> row.id
DETACH DELETE old;

// acme / deliver-weekly: call get_integration_status first, and only when channel = slack.
MERGE (s:Skill {tenant_id: 'acme', id: 'demo-acme-deliver'})
ON CREATE SET s.created_at = datetime('2026-01-01T00:00:00Z')
SET s.symfonic_key = '["skill", "' + s.tenant_id + '", null, "deliver-weekly"]',
    s.namespace = null, s.identifier = 'deliver-weekly',
    s.label = 'Deliver the weekly report', s.steps = ['get_integration_status', 'deliver'],
    s.action_tool = 'deliver', s.context = 'Weekly reporting to chat channels',
    s.status = 'approved', s.active = true, s.source = 'authored:demo', s.updated_at = datetime(),
    s.symfonic_write_id = null, s.symfonic_base_key = null, s.symfonic_rev = null
REMOVE s:SymfonicRetracted, s:SymfonicUnpublished
WITH s
CALL (s) {
  MATCH (s)-[:REQUIRES]->(old:Precondition) WHERE old.tenant_id = s.tenant_id
  DETACH DELETE old
}
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'acme', kind: 'tool', tool: 'get_integration_status(channel=<x>)'}),
       (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'acme', kind: 'state', path: 'channel', op: 'eq', value: 'slack'}),
       (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: 'acme', kind: 'text', text: 'Summarise before you deliver.'});

// acme, only for end user "user-7": a reminder about invoice 4711.
MERGE (t:Trigger {tenant_id: 'acme', id: 'demo-acme-invoice'})
ON CREATE SET t.created_at = datetime('2026-01-01T00:00:00Z')
SET t.symfonic_key = '["trigger", "' + t.tenant_id + '", "user-7", "invoice-4711"]',
    t.namespace = 'user-7', t.identifier = 'invoice-4711',
    t.condition = 'the user mentions invoice', t.task = 'Tell the user that invoice 4711 is overdue.',
    t.status = 'pending', t.resolved_at = null, t.updated_at = datetime(),
    t.symfonic_write_id = null, t.symfonic_base_key = null
REMOVE t:SymfonicRetracted, t:SymfonicUnpublished;

// globex / refund: verify the customer first.
MERGE (s:Skill {tenant_id: 'globex', id: 'demo-globex-refund'})
ON CREATE SET s.created_at = datetime('2026-01-01T00:00:00Z')
SET s.symfonic_key = '["skill", "' + s.tenant_id + '", null, "refund"]',
    s.namespace = null, s.identifier = 'refund',
    s.label = 'Refund an order', s.steps = ['verify_identity', 'refund'],
    s.action_tool = 'refund', s.context = 'Refunds need a verified customer',
    s.status = 'approved', s.active = true, s.source = 'authored:demo', s.updated_at = datetime(),
    s.symfonic_write_id = null, s.symfonic_base_key = null, s.symfonic_rev = null
REMOVE s:SymfonicRetracted, s:SymfonicUnpublished
WITH s
CALL (s) {
  MATCH (s)-[:REQUIRES]->(old:Precondition) WHERE old.tenant_id = s.tenant_id
  DETACH DELETE old
}
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'globex', kind: 'tool', tool: 'verify_identity'});

// globex, every end user of the tenant.
MERGE (t:Trigger {tenant_id: 'globex', id: 'demo-globex-renewal'})
ON CREATE SET t.created_at = datetime('2026-01-01T00:00:00Z')
SET t.symfonic_key = '["trigger", "' + t.tenant_id + '", null, "renewal-discount"]',
    t.namespace = null, t.identifier = 'renewal-discount',
    t.condition = 'the user mentions renewal', t.task = 'Offer the annual renewal discount.',
    t.status = 'pending', t.resolved_at = null, t.updated_at = datetime(),
    t.symfonic_write_id = null, t.symfonic_base_key = null
REMOVE t:SymfonicRetracted, t:SymfonicUnpublished;

// Bump each tenant's catalog version: cached pre-flight blocks are rebuilt.
MERGE (c:SymfonicCatalog {tenant_id: 'acme'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;
MERGE (c:SymfonicCatalog {tenant_id: 'globex'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;
