// name: facts_write
// params: rows
// returns: ids
// mode: write
// One result row holds every id, in row order.
UNWIND range(0, size($rows) - 1) AS seq
WITH $rows[seq] AS row, seq
CREATE (f:Fact)
SET f.id = row.id, f.tenant_id = row.tenant_id, f.namespace = row.namespace,
    f.text = row.text, f.created_at = datetime(), f.symfonic_write_id = row.write_id,
    f.symfonic_tenant_token = row.tenant_token, f:SymfonicTokened
FOREACH (_ IN CASE WHEN row.write_id IS NULL THEN [] ELSE [1] END | SET f:SymfonicUnpublished)
WITH seq, f ORDER BY seq
RETURN collect(f.id) AS ids;

// name: facts_visible
// params: tenant_id, namespace, write_id
// returns: fact
// mode: read
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.published_writes, []) AS published,
     {tenant_id: $tenant_id, namespace: $namespace, write_id: $write_id} AS sc
MATCH (f:Fact)
WHERE
  // include: fact_visible
WITH f ORDER BY f.created_at, f.id
// include: fact_row
RETURN fact_row AS fact;
