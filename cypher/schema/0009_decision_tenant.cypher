// name: decision_tenant_index
// params:
// The decision log (`:SymfonicDecision`, written by Neo4jDecisionLog) is read
// and deleted per tenant: `rules report`, `decisions prune` and a scope's
// erase each start from an index seek on the tenant, so another tenant's
// decisions never cost them anything.
CREATE INDEX decision_tenant IF NOT EXISTS FOR (d:SymfonicDecision) ON (d.tenant_id);
