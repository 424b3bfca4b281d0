// fragment: node_addressable(n)
// params: tenant_id, namespace
// The one rule for a node `n` that a write of scope ($tenant_id, $namespace)
// may address by id (a WHERE body): visible to the scope (its tenant;
// tenant-wide or its own namespace), not retracted, and its published
// version (`published_version`). `published` is the tenant catalog's
// `published_writes`, bound by the including query. Whether the scope may
// change it is `node_owned`.
n.tenant_id = $tenant_id
  AND (n.namespace IS NULL OR n.namespace = $namespace)
  AND NOT n:SymfonicRetracted
  AND
  // include: published_version(n)

// fragment: node_owned(n)
// params: namespace
// True when the scope owns node `n` (exactly its namespace; tenant-wide
// nodes belong to the tenant-wide scope only). An expression; null when
// one of the two namespaces is null and the other not, which a WHERE reads
// as false.
((n.namespace IS NULL AND $namespace IS NULL) OR n.namespace = $namespace)

// fragment: same_namespace(a, b)
// params:
// True when nodes `a` and `b` are of one namespace (both tenant-wide, or
// both of the same namespace); never null. An expression.
coalesce(a.namespace = b.namespace, a.namespace IS NULL AND b.namespace IS NULL)

// fragment: published_version(n)
// params:
// True when node `n` is what readers see of its key once every listed write
// is applied: not replaced by a published write, and either live or staged
// by a write on `published` (the tenant catalog's `published_writes`, bound
// by the including query). An expression.
(NOT coalesce(n.symfonic_replaced_by IN published, false)
 AND (NOT n:SymfonicUnpublished OR (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN published))

// fragment: visible_version(n, own_write)
// params:
// published_version, where the scope's own staged write `own_write` (a
// write id, or null) also shows: true when node `n` is not replaced by a
// published write and is live, of `own_write`, or of a listed write. An
// expression.
(NOT coalesce(n.symfonic_replaced_by IN published, false) AND
 // include: staged_visible(n, own_write)
)

// fragment: staged_visible(n, own_write)
// params:
// True when node `n` is live, staged by the scope's own write `own_write`,
// or staged by a write on `published` (bound by the including query).
(NOT n:SymfonicUnpublished OR n.symfonic_write_id = own_write
 OR (coalesce(n.namespace, '') + '\u001F' + n.symfonic_write_id) IN published)
