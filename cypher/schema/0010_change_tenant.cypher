// name: change_tenant_index
// params:
// Change records (`:SymfonicChange`) and erasure receipts (`:SymfonicErasure`)
// are read per tenant: `skills history`, `tenants erasures --tenant` and a
// scope's erase start from an index seek on the tenant.
CREATE INDEX change_tenant IF NOT EXISTS FOR (c:SymfonicChange) ON (c.tenant_id);

// name: erasure_tenant_index
// params:
CREATE INDEX erasure_tenant IF NOT EXISTS FOR (e:SymfonicErasure) ON (e.tenant_id);
