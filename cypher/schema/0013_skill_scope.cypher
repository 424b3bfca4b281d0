// name: skill_scope_index
// params:
// Cost isolation of the checks inside a skill write: a range index on
// (tenant_id, namespace), so that counting what one namespace owns (the cap
// and budget check of every skill write, scope_load) seeks that namespace's
// skills instead of reading every skill of the tenant. A seed file of 50
// namespaces of 2,000 read the whole tenant twice per namespace. Skills of
// the tenant-wide scope (no namespace) are not in it; their count seeks the
// tenant index as before.
CREATE INDEX skill_scope IF NOT EXISTS FOR (s:Skill) ON (s.tenant_id, s.namespace);
