// name: trigger_key_unique
// params:
// One trigger per (tenant, namespace, identifier): set_trigger with the same
// identifier replaces, even when a retry races the write it repeats.
CREATE CONSTRAINT trigger_symfonic_key IF NOT EXISTS FOR (t:Trigger) REQUIRE t.symfonic_key IS UNIQUE;
