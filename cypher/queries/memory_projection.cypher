// fragment: trigger_visible
// params:
// The one visibility rule of a trigger `t` (a WHERE body): pending, of the
// scope map `sc` ({tenant_id, namespace, write_id}) -- its tenant, tenant-wide
// or its namespace -- not replaced by a published re-seed, not retracted, and
// staged only when it is the scope's own write or published (`published`,
// the tenant catalog's list, bound by the including query). Every trigger
// read includes it: the turn's snapshot and triggers_pending.
t.tenant_id = sc.tenant_id
  AND t.status = 'pending'
  AND (t.namespace IS NULL OR t.namespace = sc.namespace)
  AND NOT t:SymfonicRetracted
  AND
  // include: visible_version(t, sc.write_id)

// fragment: trigger_offerable(similarity)
// params: now
// What may be offered at $now of a visible trigger `t` (a WHERE body, after
// trigger_visible): a kind this release offers (absent: text; an event
// trigger only with its on_tool, the capability matches the call; a semantic
// trigger only when `similarity`, the vector index's score of its embedding
// against the turn's, reaches the entry's `sc.similarity_floor`: a seek that
// scores nothing passes null and never offers one); a time trigger only once
// its due_at has passed (a time trigger without a usable due_at never); none
// before its snoozed_until, none at or after its expires_at. Read from the
// properties themselves, never from the offer key.
coalesce(t.kind, 'text') IN ['text', 'time', 'event', 'semantic']
  AND (coalesce(t.kind, 'text') <> 'event' OR t.on_tool IS NOT NULL)
  AND (coalesce(t.kind, 'text') <> 'semantic' OR coalesce(similarity >= sc.similarity_floor, false))
  AND CASE WHEN t.due_at IS NULL THEN coalesce(t.kind, 'text') <> 'time'
           ELSE coalesce(t.due_at <= $now, false) END
  AND coalesce(NOT t.snoozed_until > $now, true)
  AND coalesce(NOT t.expires_at <= $now, true)

// fragment: trigger_row
// params:
// The one projection of a trigger `t` into `trigger_row`: its documented
// properties (models.trigger_from_row reads them), dates as strings. Keeps
// every other variable in scope (the offerable reads' `similarity`).
WITH *, t {.id, .tenant_id, .namespace, .condition, .task, .status, .kind, .resolution, .recurrence, .on_tool,
           .same_args, .where, .once,
           created_at: toStringOrNull(t.created_at), resolved_at: toStringOrNull(t.resolved_at),
           due_at: toStringOrNull(t.due_at), expires_at: toStringOrNull(t.expires_at),
           snoozed_until: toStringOrNull(t.snoozed_until)} AS trigger_row

// fragment: fact_visible
// params:
// The one visibility rule of a fact `f` (a WHERE body), as trigger_visible
// without the status: of the scope map `sc`, not retracted, staged only when
// it is the scope's own write or published.
f.tenant_id = sc.tenant_id
  AND (f.namespace IS NULL OR f.namespace = sc.namespace)
  AND NOT f:SymfonicRetracted
  AND
  // include: staged_visible(f, sc.write_id)

// fragment: fact_row
// params:
// The one projection of a fact `f` into `fact_row` (models.fact_from_row reads it).
WITH f, f {.id, .tenant_id, .namespace, .text, created_at: toStringOrNull(f.created_at)} AS fact_row
