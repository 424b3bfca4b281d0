// name: decisions_record
// params: rows
// returns: written
// mode: write
// Decision log (opt-in, Neo4jDecisionLog): one :SymfonicDecision node per kept
// gate decision, written in batches off the turn's path.
UNWIND $rows AS row
CREATE (d:SymfonicDecision)
SET d.tenant_id = row.tenant_id, d.namespace = row.namespace, d.tool = row.tool,
    d.call_id = row.call_id, d.rule_ids = row.rule_ids, d.decision = row.decision,
    d.mode = row.mode, d.reason = row.reason, d.at = row.at, d.conversation = row.conversation
RETURN count(d) AS written;

// name: decisions_prune
// params: tenant_id, before, limit
// returns: pruned
// mode: write
// Prune, one bounded batch: the tenant's decisions recorded before $before (epoch seconds).
MATCH (d:SymfonicDecision) WHERE d.tenant_id = $tenant_id AND d.at < $before
WITH d LIMIT $limit
DETACH DELETE d
RETURN count(*) AS pruned;

// name: decisions_report
// params: tenant_id, namespace, since
// returns: rule_id, identifier, blocks, would_blocks, conversations, examples
// mode: read
// Report: per rule, the blocks and would-blocks since $since (epoch seconds),
// in one namespace ($namespace) or the whole tenant (null). Conversations are
// distinct thread ids, else distinct call ids.
MATCH (d:SymfonicDecision) WHERE d.tenant_id = $tenant_id AND d.at >= $since
  AND ($namespace IS NULL OR d.namespace = $namespace)
  AND d.decision IN ['block', 'would_block']
UNWIND d.rule_ids AS rule_id
WITH rule_id, d ORDER BY d.at DESC
WITH rule_id,
     sum(CASE d.decision WHEN 'block' THEN 1 ELSE 0 END) AS blocks,
     sum(CASE d.decision WHEN 'would_block' THEN 1 ELSE 0 END) AS would_blocks,
     count(DISTINCT coalesce(d.conversation, d.call_id)) AS conversations,
     collect({tool: d.tool, call_id: d.call_id, decision: d.decision, reason: d.reason, at: d.at,
              namespace: d.namespace, conversation: d.conversation})[..3] AS examples
OPTIONAL MATCH (s:Skill {tenant_id: $tenant_id, id: rule_id})
RETURN rule_id, head(collect(s.identifier)) AS identifier, blocks, would_blocks, conversations, examples
ORDER BY blocks + would_blocks DESC, rule_id;

// name: decisions_totals
// params: tenant_id, namespace, since
// returns: decision, count
// mode: read
// Report: how many decisions of each kind since $since (epoch seconds), in one
// namespace ($namespace) or the whole tenant (null); refusals, pass-throughs
// and stale-rules decisions name no rule, so only these totals count them.
MATCH (d:SymfonicDecision) WHERE d.tenant_id = $tenant_id AND d.at >= $since
  AND ($namespace IS NULL OR d.namespace = $namespace)
RETURN d.decision AS decision, count(*) AS count
ORDER BY decision;
