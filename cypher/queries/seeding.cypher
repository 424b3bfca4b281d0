// name: seed_existing_skills
// params: keys
// returns: key, tenant_id, namespace, label, identifier, steps, action_tool, context, status, source, live, preconditions, rev, enforcement
// mode: read
// The live skills that hold a seed file's keys, with their preconditions in
// position order, for `seed` to count what it creates, updates or leaves
// unchanged (and `seed --plan` to say so without writing).
UNWIND $keys AS key
MATCH (s:Skill {symfonic_key: key})
OPTIONAL MATCH (s)-[r:REQUIRES]->(p:Precondition)
WHERE p.tenant_id = s.tenant_id
WITH key, s, r, p ORDER BY r.position
WITH key, s, collect(CASE WHEN p IS NOT NULL THEN p {.kind, .tool, .same_args, .within, .tools, .path, .op, .value,
                                                     .if_missing, .text, .same_args_from, .where, .latest,
                                                     .voided_by, .message, .alternatives, .max_calls, .max_sum,
                                                     .sum, .per, .window, position: r.position} END) AS preconditions
RETURN key, s.tenant_id AS tenant_id, s.namespace AS namespace, s.label AS label, s.identifier AS identifier,
       s.steps AS steps, s.action_tool AS action_tool, s.context AS context, s.status AS status,
       s.source AS source, coalesce(s.active, true) = true AND NOT s:SymfonicRetracted AS live, preconditions,
       s.symfonic_rev AS rev, s.enforcement AS enforcement;

// name: seed_existing_triggers
// params: keys
// returns: key, tenant_id, namespace, identifier, condition, task, kind, due_at, expires_at, recurrence, on_tool, same_args, where, once, embedding, live
// mode: read
// The triggers that hold a seed file's keys (see seed_existing_skills), their
// times as epoch milliseconds, as a write row carries them.
UNWIND $keys AS key
MATCH (t:Trigger {symfonic_key: key})
RETURN key, t.tenant_id AS tenant_id, t.namespace AS namespace, t.identifier AS identifier,
       t.condition AS condition, t.task AS task, coalesce(t.kind, 'text') AS kind,
       CASE WHEN valueType(t.due_at) STARTS WITH 'ZONED DATETIME' THEN t.due_at.epochMillis END AS due_at,
       CASE WHEN valueType(t.expires_at) STARTS WITH 'ZONED DATETIME' THEN t.expires_at.epochMillis END AS expires_at,
       t.recurrence AS recurrence, t.on_tool AS on_tool, t.same_args AS same_args, t.where AS where, t.once AS once,
       t.embedding AS embedding, t.status = 'pending' AND NOT t:SymfonicRetracted AS live;
