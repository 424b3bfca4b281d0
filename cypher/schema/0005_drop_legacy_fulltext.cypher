// name: drop_legacy_memory_text
// params:
// Drop the first release's full-text index. Recall has used
// `symfonic_memory_text_v2` (0004) since 0004; the old index was kept only
// for processes of the first release during their upgrade, and every write
// still paid for it (measured: 10-25% of bulk skill seeding, see
// docs/performance.md). Apply this once no process of the first release runs.
DROP INDEX symfonic_memory_text IF EXISTS;
