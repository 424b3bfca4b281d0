// name: memory_text_tenant_index
// params:
// Full-text index for generic recall that also indexes `tenant_id`.
// Recall's Lucene query makes the tenant a required phrase clause, so the
// search itself yields only the caller's tenant (plus, at worst, tenants whose
// ids contain its tokens in order; the exact Cypher equality removes those),
// and recall's cost does not grow with other tenants' data. The analyzer is
// pinned: the tenant clause relies on the query and the index analysing the
// tenant id the same way. A new name instead of drop-and-recreate, so that a
// process of the previous release keeps using `symfonic_memory_text` while the
// fleet upgrades; a later migration drops the old index.
CREATE FULLTEXT INDEX symfonic_memory_text_v2 IF NOT EXISTS
FOR (n:Skill|Trigger|Fact) ON EACH [n.tenant_id, n.label, n.context, n.condition, n.task, n.text]
OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-no-stop-words', `fulltext.eventually_consistent`: false}};
