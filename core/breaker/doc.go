// Package breaker is the per-target circuit breaker of docs/runner.md, a pure machine.
//
// Rules:
//
//  1. Closed admits every attempt. A counted failure adds its time, drops times older than
//     Window (strictly older than now−Window), and opens the circuit (until = now+Cooldown)
//     when Threshold times remain. A success clears the times.
//  2. Open refuses before until (the caller defers the job to until). At or after until the
//     circuit moves to HalfOpen and admits the first probe.
//  3. HalfOpen admits while fewer than Probes probes are in flight. Refused jobs are deferred to
//     now+Cooldown (a choice: the breaker does not know when the probes will end).
//  4. Only the outcome of a probe of the current half-open phase decides HalfOpen: a probe success
//     closes, a probe failure reopens with a fresh cooldown. Outcomes of attempts admitted
//     before the circuit opened, or of probes of an earlier phase, are ignored there and in Open.
//  5. Counted failures (Result.Counts): a retryable failure and a panic. A permanent
//     (non-retryable) failure is the job's fault, not the target's, and counts as a success.
//  6. A probe that ends without an outcome (its job was cancelled before it was dispatched,
//     its payload could not be decoded, or a graceful stop released it)
//     is given back with Release, so the phase can admit another.
//  7. The one machine surface: New(Config) (*Breaker, error), Step(Admit/Record/Release),
//     Ready() (the last Admit's Decision), WakeAt() (until, when Open), Status().
//
// Invariants: Closed holds < Threshold failure times, ascending, none older than Window
// before the latest; Open has a non-zero until; HalfOpen has 0 ≤ inFlight ≤ Probes.
// Breaker state is in memory only: a restart begins Closed.
package breaker
