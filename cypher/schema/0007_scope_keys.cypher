// name: trigger_scope_index
// params:
// Cost isolation of the trigger read: a library-maintained scope
// key on every trigger, `symfonic_scope` = tenant_id + U+001F + (namespace or
// ''), indexed with the status. A turn seeks the tenant-wide key and its own
// namespace's key, so another namespace's pending triggers are never handed
// to its filter. (A range index cannot hold a null namespace; the key can.)
// Existing triggers get the key from `GraphMemoryStore.stamp_keys`, which
// `apply_schema` runs after the migrations (see docs/graph-model.md).
CREATE INDEX trigger_scope IF NOT EXISTS FOR (t:Trigger) ON (t.symfonic_scope, t.status);

// name: memory_text_token_index
// params:
// Full-text index for recall with an exact tenant token: `symfonic_tenant_token`
// is 't' + the SHA-256 hex digest of the tenant id, one alphanumeric token
// under the analyzer, so `+symfonic_tenant_token:<token>` matches one tenant
// only, whatever its id shares with others (0004's phrase over the tokenised
// tenant_id matched `acme-eu` for `acme`). `tenant_id` stays indexed for nodes
// seeded with plain Cypher that have no token yet. A new name, as 0004 did: a
// process of the previous release keeps using `symfonic_memory_text_v2`.
CREATE FULLTEXT INDEX symfonic_memory_text_v3 IF NOT EXISTS
FOR (n:Skill|Trigger|Fact) ON EACH [n.symfonic_tenant_token, n.tenant_id, n.label, n.context, n.condition, n.task, n.text]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-no-stop-words', `fulltext.eventually_consistent`: false}};
