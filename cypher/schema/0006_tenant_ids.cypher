// name: skill_id_per_tenant
// params:
// Ids are unique per tenant: a (tenant_id, id) key replaces the
// global `skill_id` constraint, so two tenants may seed the same id and a
// `MERGE (s:Skill {tenant_id: ..., id: ...})` never reaches another tenant's
// node. Created before the global constraint is dropped, so no moment is
// without one; data written under the global constraint always satisfies it.
CREATE CONSTRAINT skill_id_per_tenant IF NOT EXISTS FOR (s:Skill) REQUIRE (s.tenant_id, s.id) IS UNIQUE;

// name: trigger_id_per_tenant
// params:
CREATE CONSTRAINT trigger_id_per_tenant IF NOT EXISTS FOR (t:Trigger) REQUIRE (t.tenant_id, t.id) IS UNIQUE;

// name: fact_id_per_tenant
// params:
CREATE CONSTRAINT fact_id_per_tenant IF NOT EXISTS FOR (f:Fact) REQUIRE (f.tenant_id, f.id) IS UNIQUE;

// name: drop_skill_id_global
// params:
DROP CONSTRAINT skill_id IF EXISTS;

// name: drop_trigger_id_global
// params:
DROP CONSTRAINT trigger_id IF EXISTS;

// name: drop_fact_id_global
// params:
DROP CONSTRAINT fact_id IF EXISTS;
