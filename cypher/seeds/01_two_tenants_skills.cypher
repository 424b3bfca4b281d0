// Seed: two tenants' skills, in plain Cypher (docs/graph-model.md).
//
// Tenants "acme" and "globex" share one database and never see each other's
// nodes. Written without the library and without markers, in the documented
// shape: a :Skill with its :Precondition nodes hung off
// (:Skill)-[:REQUIRES {position}]->(:Precondition), each precondition carrying
// the skill's tenant_id.
//
// Run it with `symfonic-graph cypher run cypher/seeds/01_two_tenants_skills.cypher`
// (one transaction: all of it or, on any error, nothing). Statements end with
// a `;` at the end of a line.
// Idempotent and per tenant: every node is MERGEd on its (tenant_id, id) key,
// so a copy of this file for another tenant (only the tenant ids changed)
// writes that tenant's own nodes and never touches these. Each skill with an
// identifier also gets the library's identifier key (symfonic_key, built from
// its tenant_id), so a later library re-seed of the identifier replaces it.
// Preconditions are deleted and re-created on every run. The last statements
// bump each tenant's catalog version so cached pre-flight blocks refresh.

// acme / deliver: call get_integration_status first, and only when channel = slack.
MERGE (s:Skill {tenant_id: 'acme', id: 'seed-acme-deliver'})
SET s.namespace = null,
    s.label = 'Deliver a report to chat', s.identifier = 'deliver',
    s.symfonic_key = '["skill", "' + s.tenant_id + '", null, "deliver"]',
    s.steps = ['get_integration_status', 'deliver'], s.action_tool = 'deliver',
    s.context = 'Reports go to the connected chat integration.',
    s.status = 'approved', s.active = true, s.source = 'authored:seed',
    s.created_at = coalesce(s.created_at, datetime('2026-01-01T00:00:00Z'));

MATCH (:Skill {tenant_id: 'acme', id: 'seed-acme-deliver'})-[:REQUIRES]->(p:Precondition) DETACH DELETE p;

MATCH (s:Skill {tenant_id: 'acme', id: 'seed-acme-deliver'})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'acme', kind: 'tool', tool: 'get_integration_status'}),
       (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'acme', kind: 'state', path: 'channel', op: 'eq', value: 'slack'});

// acme / schedule: tool with an argument list, an `in` predicate and advisory text.
MERGE (s:Skill {tenant_id: 'acme', id: 'seed-acme-schedule'})
SET s.namespace = null,
    s.label = 'Schedule a report', s.identifier = 'schedule',
    s.symfonic_key = '["skill", "' + s.tenant_id + '", null, "schedule"]',
    s.steps = ['get_status(brand_id=<x>)', 'schedule_report'], s.action_tool = 'schedule_report',
    s.context = 'Only weekly or monthly schedules.',
    s.status = 'approved', s.active = true, s.source = 'authored:seed',
    s.created_at = coalesce(s.created_at, datetime('2026-01-01T00:00:01Z'));

MATCH (:Skill {tenant_id: 'acme', id: 'seed-acme-schedule'})-[:REQUIRES]->(p:Precondition) DETACH DELETE p;

MATCH (s:Skill {tenant_id: 'acme', id: 'seed-acme-schedule'})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'acme', kind: 'tool', tool: 'get_status(brand_id=<x>)'}),
       (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'acme', kind: 'state', path: 'plan.period', op: 'in', value: ['weekly', 'monthly']}),
       (s)-[:REQUIRES {position: 2}]->(:Precondition {tenant_id: 'acme', kind: 'text', text: 'Confirm the time zone with the user.'});

// acme / a draft: hidden from turns until approved.
MERGE (s:Skill {tenant_id: 'acme', id: 'seed-acme-purge-draft'})
SET s.namespace = null,
    s.label = 'Purge old reports', s.identifier = null,
    s.steps = ['purge_reports'], s.action_tool = 'purge_reports', s.context = '',
    s.status = 'draft', s.active = true, s.source = 'learned:seed',
    s.created_at = coalesce(s.created_at, datetime('2026-01-01T00:00:02Z'));

// globex / deliver: same identifier, other tenant: an independent skill.
MERGE (s:Skill {tenant_id: 'globex', id: 'seed-globex-deliver'})
SET s.namespace = null,
    s.label = 'Deliver a report by e-mail', s.identifier = 'deliver',
    s.symfonic_key = '["skill", "' + s.tenant_id + '", null, "deliver"]',
    s.steps = ['verify_recipient', 'deliver'], s.action_tool = 'deliver',
    s.context = 'Globex delivers by e-mail only.',
    s.status = 'approved', s.active = true, s.source = 'authored:seed',
    s.created_at = coalesce(s.created_at, datetime('2026-01-01T00:00:00Z'));

MATCH (:Skill {tenant_id: 'globex', id: 'seed-globex-deliver'})-[:REQUIRES]->(p:Precondition) DETACH DELETE p;

MATCH (s:Skill {tenant_id: 'globex', id: 'seed-globex-deliver'})
CREATE (s)-[:REQUIRES {position: 0}]->(:Precondition {tenant_id: 'globex', kind: 'tool', tool: 'verify_recipient'}),
       (s)-[:REQUIRES {position: 1}]->(:Precondition {tenant_id: 'globex', kind: 'state', path: 'recipient.verified', op: 'exists'});

// Bump each tenant's catalog version: cached pre-flight blocks are rebuilt.
MERGE (c:SymfonicCatalog {tenant_id: 'acme'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;

MERGE (c:SymfonicCatalog {tenant_id: 'globex'}) ON CREATE SET c.version = 0 SET c.version = c.version + 1;
