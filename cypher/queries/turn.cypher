// name: turn_snapshot
// params: tenant_id, namespace, known_version
// Everything a turn reads before the model runs, in one round trip: the
// tenant's catalog version, its visible approved skills (only when the version
// differs from $known_version, i.e. the caller's cache is stale) and the
// pending triggers of the scope. Visibility is the same as skills_visible and
// triggers_pending (no write_id: turns never see staged writes).
OPTIONAL MATCH (c:SymfonicCatalog {tenant_id: $tenant_id})
WITH coalesce(c.version, 0) AS version, coalesce(c.published_writes, []) AS published
CALL (version, published) {
  OPTIONAL MATCH (s:Skill)
  WHERE version <> $known_version
    AND s.tenant_id = $tenant_id
    AND (s.namespace IS NULL OR s.namespace = $namespace)
    AND NOT coalesce(s.symfonic_replaced_by IN published, false)
    AND NOT s:SymfonicRetracted
    AND (NOT s:SymfonicUnpublished
         OR (coalesce(s.namespace, '') + '\u001F' + s.symfonic_write_id) IN published)
    AND s.status = 'approved'
    AND coalesce(s.active, true) = true
  WITH s ORDER BY s.created_at, s.id
  CALL (s) {
    OPTIONAL MATCH (s)-[r:REQUIRES]->(p:Precondition)
    WHERE p.tenant_id = s.tenant_id
    WITH r, p ORDER BY r.position
    RETURN collect(p {.*, position: r.position}) AS preconditions
  }
  WITH s, preconditions WHERE s IS NOT NULL
  RETURN collect({
    skill: s {.id, .tenant_id, .namespace, .label, .identifier, .steps, .action_tool, .context, .status,
              .active, .source, created_at: toStringOrNull(s.created_at)},
    labels: labels(s),
    preconditions: preconditions,
    foreign: COUNT { (s)-[:REQUIRES]->(x:Precondition) WHERE x.tenant_id IS NULL OR x.tenant_id <> s.tenant_id }
  }) AS skills
}
CALL (published) {
  OPTIONAL MATCH (t:Trigger)
  WHERE t.tenant_id = $tenant_id
    AND (t.namespace IS NULL OR t.namespace = $namespace)
    AND NOT t:SymfonicRetracted
    AND (NOT t:SymfonicUnpublished
         OR (coalesce(t.namespace, '') + '\u001F' + t.symfonic_write_id) IN published)
    AND t.status = 'pending'
  WITH t ORDER BY t.created_at, t.id
  RETURN collect(t {.id, .tenant_id, .namespace, .condition, .task, .status,
                    created_at: toStringOrNull(t.created_at)}) AS triggers
}
RETURN version, version <> $known_version AS skills_fresh, skills, triggers;
