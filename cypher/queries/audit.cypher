// name: trigger_selection_record
// params: tenant_id, namespace, trigger_ids
// returns: selected_at
// mode: write
// Audit trail (opt-in, Neo4jSelectionAuditSink): one node per turn that selected triggers.
CREATE (a:SymfonicTriggerSelection)
SET a.tenant_id = $tenant_id, a.namespace = $namespace,
    a.trigger_ids = $trigger_ids, a.selected_at = datetime()
RETURN a.selected_at AS selected_at;
