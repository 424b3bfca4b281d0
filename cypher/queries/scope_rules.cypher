// fragment: node_addressable
// params: tenant_id, namespace
// The one rule for a node `n` that a write of scope ($tenant_id, $namespace)
// may address by id (a WHERE body): visible to the scope (its tenant;
// tenant-wide or its own namespace), not retracted, published (or part of a
// published write) and not replaced by a published write. `published` is the
// tenant catalog's `published_writes`, bound by the including query. Whether
// the scope may change it is `node_owned`.
n.tenant_id = $tenant_id
  AND (n.namespace IS NULL OR n.namespace = $namespace)
  AND NOT n:SymfonicRetracted
  AND NOT coalesce(n.symfonic_replaced_by IN published, false)
  AND (NOT n:SymfonicUnpublished
       OR (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN published)

// fragment: node_owned
// params: namespace
// True when the scope owns node `n` (exactly its namespace; tenant-wide
// nodes belong to the tenant-wide scope only). An expression.
((n.namespace IS NULL AND $namespace IS NULL) OR n.namespace = $namespace)
