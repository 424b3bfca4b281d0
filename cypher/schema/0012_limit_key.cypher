// name: limit_key_constraint
// params:
// Store-counted limits (a `limit` precondition with `per: namespace` or
// `per: tenant`): one `:SymfonicLimit` node per rule and scope holds the
// reservations of its window. The key is unique, so that concurrent first
// reservations merge into one node and their slots are counted together.
CREATE CONSTRAINT symfonic_limit_key IF NOT EXISTS FOR (l:SymfonicLimit) REQUIRE l.key IS UNIQUE;

// name: limit_tenant_index
// params:
// A scope's erase deletes its limits from an index seek on the tenant.
CREATE INDEX limit_tenant IF NOT EXISTS FOR (l:SymfonicLimit) ON (l.tenant_id);
