// Package retry is the retry policy and budget of docs/runner.md as pure functions.
//
// Rules:
//
//  1. At most Policy.Attempts attempts run in total, the first included.
//  2. The n-th retry (n = 0 after the first failure) waits delay(n) = min(Base·2^n, Cap),
//     computed without overflow.
//  3. Equal jitter: wait = h + r mod (h+1) with h = floor(delay/2) in nanoseconds and r a
//     uint32 supplied by the caller, so wait ∈ [delay/2, delay].
//  4. A server-requested wait (after, e.g. Retry-After) replaces the jittered wait, capped at
//     Cap (and at least 0).
//  5. Deadline (0 = none) counts from the job's first due time: no attempt starts at or after
//     firstDue+Deadline, and a retry whose due would land at or past it is not scheduled.
//  6. Admission of a due job (Admit): only when a pool unit is free; then deadline passed →
//     dead(late); attempts spent → dead(spent); breaker refuses → defer; else start. The
//     breaker is asked last, so a refused or dead job never consumes a probe.
//
// Invariants: a valid Policy has Attempts ≥ 1, 0 < Base ≤ Cap, Deadline ≥ 0.
package retry
