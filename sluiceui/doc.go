// Package sluiceui is a web UI for a sluice runner: an http.Handler a service mounts beside
// its live runner (FromRunner), and which `sluice serve` runs over a stopped directory
// (FromDir, read-only). Pages are rendered on the server with html/template from files
// embedded in the binary: no build step, no script, nothing fetched from elsewhere.
//
// Pages: the overview (jobs by state, the journal's fsync batches, records per batch and
// throughput), the jobs list (filters by state, kind and target; pages by id), a job (its
// fields, payload and attempt history), the breakers (state and cooldown per target), and
// the confirmation of an action (retry a dead job, cancel one that is not terminal).
//
// Invariants:
//
//  1. A GET changes nothing. A job changes only on a POST that passes the same-origin check
//     (http.CrossOriginProtection), carries the token of the confirmation page for that
//     action on that job, and is allowed by Options.Authorize.
//  2. Without Options.Authorize every action is refused: mounting the handler never lets a
//     visitor change a job by default. Options.ReadOnly, or a read-only Source, hides and
//     refuses actions whatever Authorize says.
//  3. Links are relative, so the handler works under any prefix ending in "/".
//  4. The UI decides nothing about jobs: Retry and Cancel go to the Source, whose runner
//     decides (and refuses with sluice.ErrNotDead, sluice.ErrTerminal, ...).
package sluiceui
