// fragment: skill_visible
// params:
// The one visibility rule of a skill `s` (a WHERE body). It reads the scope
// from the map `sc` ({tenant_id, namespace, write_id, include_drafts,
// include_retracted}) and the tenant catalog's list of published writes from
// `published`, both bound by the including query. Every skill read includes
// it: TurnMemory (one scope or many in one query), query_skills, the CLI.
s.tenant_id = sc.tenant_id
  AND (s.namespace IS NULL OR s.namespace = sc.namespace)
  AND (sc.include_retracted OR NOT s:SymfonicRetracted)
  AND
  // include: visible_version(s, sc.write_id)
  AND (s.status = 'approved' OR (sc.include_drafts AND s.status = 'draft'))
  AND coalesce(s.active, true) = true

// fragment: skill_row
// params:
// The one projection of a skill `s` into `skill_row`: its documented
// properties (absent ones come back null; the Python model maps them to their
// defaults), its markers, its preconditions in position order, and the
// revision stamps that let a reader detect a skill torn by a concurrent
// re-seed. Keeps `s` in scope. A precondition that cannot be attributed to
// the skill's tenant (its tenant_id missing, misspelt or another tenant's)
// comes back as an entry of an unknown kind with nothing of its content: the
// model reads it as unreadable, so the skill keeps blocking its action
// (fails closed) and another tenant's text never reaches this tenant.
// `unknown` lists the properties of a node that are not documented (a
// skill's with their value when it is a short string), so that the model can
// keep a skill blocking when one is a misspelling that would weaken it
// (`same_arg`, `acton_tool`); the two lists of names equal
// shape/properties.py's (a test keeps them so).
CALL (s) {
  OPTIONAL MATCH (s)-[r:REQUIRES]->(p:Precondition)
  WITH r, p ORDER BY r.position
  RETURN collect(CASE WHEN p IS NULL THEN null
                   WHEN p.tenant_id = s.tenant_id
                   THEN p {.kind, .tool, .same_args, .within, .tools, .path, .op, .value, .if_missing, .text,
                           .same_args_from, .where, .latest, .voided_by, .message, .alternatives, .max_calls,
                           .max_sum, .sum, .per, .window,
                           position: r.position, rev: p.symfonic_rev,
                           unknown: [k IN keys(p) WHERE NOT k STARTS WITH 'symfonic_' AND NOT k IN
                             ['tenant_id', 'namespace', 'kind', 'tool', 'same_args', 'within', 'tools', 'path',
                              'op', 'value', 'if_missing', 'text', 'same_args_from', 'where', 'latest',
                              'voided_by', 'message', 'alternatives', 'max_calls', 'max_sum', 'sum', 'per',
                              'window']]}
                   ELSE {kind: "precondition of no tenant or another tenant (its tenant_id is not this skill's)",
                         position: r.position}
                 END) AS preconditions
}
WITH s, {
  skill: s {.id, .tenant_id, .namespace, .label, .identifier, .steps, .action_tool, .context, .status, .active,
            .source, .enforcement, created_at: toStringOrNull(s.created_at), rev: s.symfonic_rev,
            unknown: [k IN keys(s) WHERE NOT k STARTS WITH 'symfonic_' AND NOT k IN
                        ['id', 'tenant_id', 'namespace', 'label', 'identifier', 'steps', 'action_tool', 'context',
                         'status', 'active', 'source', 'created_at', 'updated_at', 'enforcement', 'support',
                         'confidence', 'failures_without', 'examples']
                      | [k, CASE WHEN valueType(s[k]) STARTS WITH 'STRING' AND size(s[k]) <= 128 THEN s[k] END]]},
  retracted: s:SymfonicRetracted,
  staged: s:SymfonicUnpublished,
  preconditions: preconditions
} AS skill_row

// fragment: skill_packed
// params:
// skill_row packed for a turn's cold read, as `skill_packed`: the same values
// in one list per skill, so that the driver decodes no map keys and no null
// properties. Keeps `s` in scope. The list holds, in this order: id,
// tenant_id, namespace, label, identifier, steps, action_tool, context,
// status, active, source, enforcement, created_at (text), rev, the
// undocumented [name, short string value or null] pairs (as skill_row's
// `unknown`), retracted, staged, and the preconditions in position order.
// Each precondition is [position, rev, properties]: its properties other
// than the library's and its tenant's, a documented one as a [name, value]
// pair and an undocumented one by its name only (the reader flags a
// misspelling, as with skill_row). A precondition that cannot be attributed
// to the skill's tenant is [position] alone: nothing of its content leaves
// the database, and the reader makes it an entry of an unknown kind (fails
// closed). shape/models.py `unpack_skill_row` turns the list back into
// skill_row's map; a test keeps the two projections equal.
CALL (s) {
  OPTIONAL MATCH (s)-[r:REQUIRES]->(p:Precondition)
  WITH r, p ORDER BY r.position
  RETURN collect(CASE WHEN p IS NULL THEN null
                   WHEN p.tenant_id = s.tenant_id
                   THEN [r.position, p.symfonic_rev,
                         [k IN keys(p) WHERE NOT k STARTS WITH 'symfonic_' AND k <> 'tenant_id' AND k <> 'namespace'
                          | CASE WHEN k IN
                              ['tenant_id', 'namespace', 'kind', 'tool', 'same_args', 'within', 'tools', 'path',
                               'op', 'value', 'if_missing', 'text', 'same_args_from', 'where', 'latest',
                               'voided_by', 'message', 'alternatives', 'max_calls', 'max_sum', 'sum', 'per',
                               'window']
                            THEN [k, p[k]] ELSE k END]]
                   ELSE [r.position]
                 END) AS packed_preconditions
}
WITH s, [s.id, s.tenant_id, s.namespace, s.label, s.identifier, s.steps, s.action_tool, s.context, s.status,
         s.active, s.source, s.enforcement, toStringOrNull(s.created_at), s.symfonic_rev,
         [k IN keys(s) WHERE NOT k STARTS WITH 'symfonic_' AND NOT k IN
            ['id', 'tenant_id', 'namespace', 'label', 'identifier', 'steps', 'action_tool', 'context',
             'status', 'active', 'source', 'created_at', 'updated_at', 'enforcement', 'support',
             'confidence', 'failures_without', 'examples']
          | [k, CASE WHEN valueType(s[k]) STARTS WITH 'STRING' AND size(s[k]) <= 128 THEN s[k] END]],
         s:SymfonicRetracted, s:SymfonicUnpublished, packed_preconditions] AS skill_packed
