// name: trigger_selection_tenant_index
// params:
// The opt-in audit trail of reminder selections (`:SymfonicTriggerSelection`,
// Neo4jSelectionAuditSink) is read per tenant: a scope's erase seeks the
// tenant's selections instead of scanning every tenant's (a tenant that held
// nothing read each of them before).
CREATE INDEX trigger_selection_tenant IF NOT EXISTS FOR (a:SymfonicTriggerSelection) ON (a.tenant_id);
