// name: limit_reserve
// params: key, tenant_id, namespace, now, since, max_calls, max_sum, amount, call_id
// returns: allowed, runs, total
// mode: write
// Reserve one slot of a store-counted limit, atomically across processes: the
// SET takes the node's write lock before its slots are read, so concurrent
// reservations of one rule and scope queue here and each sees the others'
// committed slots. Slots older than $since (epoch seconds) leave the window
// and are dropped. A slot is taken only while the runs stay under $max_calls
// and the sum of amounts (with $amount) within $max_sum (null: no bound).
MERGE (l:SymfonicLimit {key: $key})
ON CREATE SET l.tenant_id = $tenant_id, l.namespace = $namespace, l.at = [], l.calls = [], l.amounts = []
SET l.locked_at = $now
WITH l, [i IN range(0, size(l.at) - 1) WHERE l.at[i] >= $since] AS keep
WITH l, [i IN keep | l.at[i]] AS at, [i IN keep | l.calls[i]] AS calls, [i IN keep | l.amounts[i]] AS amounts
WITH l, at, calls, amounts, reduce(s = 0.0, a IN amounts | s + a) AS total
WITH l, at, calls, amounts, total,
     ($max_calls IS NULL OR size(at) < $max_calls) AND ($max_sum IS NULL OR total + $amount <= $max_sum) AS allowed
SET l.at = CASE WHEN allowed THEN at + $now ELSE at END,
    l.calls = CASE WHEN allowed THEN calls + $call_id ELSE calls END,
    l.amounts = CASE WHEN allowed THEN amounts + $amount ELSE amounts END
RETURN allowed, size(at) AS runs, total;

// name: limit_release
// params: key, call_id
// returns: released
// mode: write
// Release the slot a call reserved (its result failed): the slot no longer counts.
// The SET takes the node's write lock first, so the slots are read as the last reservation committed them.
MATCH (l:SymfonicLimit {key: $key})
SET l.locked_at = l.locked_at
WITH l, [i IN range(0, size(l.calls) - 1) WHERE l.calls[i] <> $call_id] AS keep
WITH l, keep, size(l.calls) - size(keep) AS released
SET l.at = [i IN keep | l.at[i]], l.calls = [i IN keep | l.calls[i]], l.amounts = [i IN keep | l.amounts[i]]
RETURN released;
