// apply: after rollout
// This migration removes what only processes of the previous release use.
// `symfonic-graph schema apply` leaves it waiting; `schema apply --after-rollout`
// applies it, once every process that uses the database runs this release.

// name: drop_memory_text_v2
// params:
// Drop the full-text index that recall used before 0007 (`symfonic_memory_text_v2`).
// This release searches `symfonic_memory_text_v3` only, but a process of the
// previous release still searches `_v2`, so it stays until the rollout is
// over. Until then every write of a skill, trigger or fact commits to both
// full-text indexes: dropping `_v2` takes about half of a write's full-text
// cost away (docs/performance.md, *What a write costs*).
DROP INDEX symfonic_memory_text_v2 IF EXISTS;
