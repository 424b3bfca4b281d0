// Demo seed for `symfonic-graph demo`: two tenants in one database, plain
// Cypher in the documented shape, no library call and no markers.
// Idempotent: MERGE on ids, preconditions replaced.

MERGE (s:Skill {id: 'demo-acme-deliver'})
SET s.tenant_id = 'acme', s.namespace = null, s.label = 'Deliver the weekly report',
    s.identifier = 'deliver-weekly', s.steps = ['get_integration_status', 'deliver'],
    s.action_tool = 'deliver', s.context = 'Weekly reporting to chat channels',
    s.status = 'approved', s.active = true, s.source = 'authored:demo',
    s.created_at = datetime('2026-01-01T00:00:00Z');

MATCH (s:Skill {id: 'demo-acme-deliver'})-[:REQUIRES]->(p:Precondition) DETACH DELETE p;

MATCH (s:Skill {id: 'demo-acme-deliver'})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'acme', kind: 'tool', tool: 'get_integration_status(channel=<x>)'}),
       (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'acme', kind: 'state', path: 'channel', op: 'eq', value: 'slack'}),
       (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: 'acme', kind: 'text', text: 'Summarise before you deliver.'});

MERGE (t:Trigger {id: 'demo-acme-invoice'})
SET t.tenant_id = 'acme', t.namespace = 'user-7',
    t.condition = 'the user mentions invoice', t.task = 'Tell the user that invoice 4711 is overdue.',
    t.status = 'pending', t.created_at = datetime('2026-01-01T00:00:00Z');

MERGE (s:Skill {id: 'demo-globex-refund'})
SET s.tenant_id = 'globex', s.namespace = null, s.label = 'Refund an order',
    s.identifier = 'refund', s.steps = ['verify_identity', 'refund'],
    s.action_tool = 'refund', s.context = 'Refunds need a verified customer',
    s.status = 'approved', s.active = true, s.source = 'authored:demo',
    s.created_at = datetime('2026-01-01T00:00:00Z');

MATCH (s:Skill {id: 'demo-globex-refund'})-[:REQUIRES]->(p:Precondition) DETACH DELETE p;

MATCH (s:Skill {id: 'demo-globex-refund'})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'globex', kind: 'tool', tool: 'verify_identity'});

MERGE (t:Trigger {id: 'demo-globex-renewal'})
SET t.tenant_id = 'globex', t.namespace = null,
    t.condition = 'the user mentions renewal', t.task = 'Offer the annual renewal discount.',
    t.status = 'pending', t.created_at = datetime('2026-01-01T00:00:00Z');

MERGE (c:SymfonicCatalog {tenant_id: 'acme'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;
MERGE (c:SymfonicCatalog {tenant_id: 'globex'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;
