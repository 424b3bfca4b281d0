// name: triggers_write
// params: rows
// Store reminders as pending triggers; staged when the row has a write_id.
UNWIND $rows AS row
CREATE (t:Trigger)
SET t.id = row.id, t.tenant_id = row.tenant_id, t.namespace = row.namespace,
    t.condition = row.condition, t.task = row.task, t.status = 'pending',
    t.created_at = datetime(), t.symfonic_write_id = row.write_id
FOREACH (_ IN CASE WHEN row.write_id IS NULL THEN [] ELSE [1] END | SET t:SymfonicUnpublished)
RETURN t.id AS id;

// name: triggers_pending
// params: tenant_id, namespace, write_id
// Unresolved triggers the scope sees, oldest first.
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
MATCH (t:Trigger)
WHERE t.tenant_id = $tenant_id
  AND (t.namespace IS NULL OR t.namespace = $namespace)
  AND NOT t:SymfonicRetracted
  AND (NOT t:SymfonicUnpublished OR t.symfonic_write_id = $write_id
       OR (coalesce(t.namespace, '') + '\u001F' + t.symfonic_write_id) IN published)
  AND t.status = 'pending'
RETURN t {.*} AS trigger
ORDER BY t.created_at, t.id;

// name: trigger_resolve
// params: tenant_id, namespace, trigger_id
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published
MATCH (t:Trigger {id: $trigger_id})
WHERE t.tenant_id = $tenant_id
  AND (t.namespace IS NULL OR t.namespace = $namespace)
  AND NOT t:SymfonicRetracted
  AND (NOT t:SymfonicUnpublished
       OR (coalesce(t.namespace, '') + '\u001F' + t.symfonic_write_id) IN published)
SET t.status = 'resolved', t.resolved_at = datetime()
RETURN t.id AS id;
