// name: trigger_selection_record
// params: tenant_id, namespace, trigger_ids, kinds
// returns: selected_at
// mode: write
// Audit trail (opt-in, Neo4jSelectionAuditSink): one node per turn that
// selected triggers, with each one's kind (in the order of trigger_ids).
CREATE (a:SymfonicTriggerSelection)
SET a.tenant_id = $tenant_id, a.namespace = $namespace,
    a.trigger_ids = $trigger_ids, a.kinds = $kinds, a.selected_at = datetime()
RETURN a.selected_at AS selected_at;
