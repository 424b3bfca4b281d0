// name: migration_version_unique
// params:
// Applied migrations are recorded as (:SymfonicMigration {version}); one node each.
CREATE CONSTRAINT symfonic_migration_version IF NOT EXISTS
FOR (m:SymfonicMigration) REQUIRE m.version IS UNIQUE;

// name: skill_id_unique
// params:
CREATE CONSTRAINT skill_id IF NOT EXISTS FOR (s:Skill) REQUIRE s.id IS UNIQUE;

// name: skill_key_unique
// params:
// One skill per (tenant, namespace, identifier): re-seeds replace, even when concurrent.
CREATE CONSTRAINT skill_symfonic_key IF NOT EXISTS FOR (s:Skill) REQUIRE s.symfonic_key IS UNIQUE;

// name: trigger_id_unique
// params:
CREATE CONSTRAINT trigger_id IF NOT EXISTS FOR (t:Trigger) REQUIRE t.id IS UNIQUE;

// name: fact_id_unique
// params:
CREATE CONSTRAINT fact_id IF NOT EXISTS FOR (f:Fact) REQUIRE f.id IS UNIQUE;

// name: skill_tenant_index
// params:
// Every per-turn read starts from an index seek on the tenant.
CREATE INDEX skill_tenant IF NOT EXISTS FOR (s:Skill) ON (s.tenant_id);

// name: precondition_tenant_index
// params:
CREATE INDEX precondition_tenant IF NOT EXISTS FOR (p:Precondition) ON (p.tenant_id);

// name: trigger_tenant_index
// params:
CREATE INDEX trigger_tenant IF NOT EXISTS FOR (t:Trigger) ON (t.tenant_id);

// name: fact_tenant_index
// params:
CREATE INDEX fact_tenant IF NOT EXISTS FOR (f:Fact) ON (f.tenant_id);

// name: catalog_tenant_unique
// params:
// One catalog version node per tenant (see docs/graph-model.md).
CREATE CONSTRAINT symfonic_catalog_tenant IF NOT EXISTS
FOR (c:SymfonicCatalog) REQUIRE c.tenant_id IS UNIQUE;
