// Package sluiceui is a web UI for a sluice runner: an http.Handler a service mounts beside
// its live runner (FromRunner), and which `sluice serve` runs over a stopped directory
// (FromDir, read-only). Pages are rendered on the server with html/template from files
// embedded in the binary: no build step, no script, nothing fetched from elsewhere.
//
// Pages: the overview (jobs by state and kind, charts of the last hour as SVG, the journal's
// fsync batches, records per batch and throughput), the jobs list (filters by state, kind and
// target; pages by id), a job (its fields, why it waits and what of flow control holds it
// back, payload, its attempts on a time axis and their history; each field downloadable in
// full), the kinds (counts, paused or not), the breakers (state and cooldown per target), the
// schedules, and the confirmation of an action (retry a dead job, cancel one that is not
// terminal, pause or resume a kind).
//
// Invariants:
//
//  1. A GET changes nothing. A job or a kind changes only on a POST that passes the
//     same-origin check (http.CrossOriginProtection), carries an unspent, unexpired token of
//     the confirmation page for that action on that job or kind, and is allowed by
//     Options.Authorize.
//  2. Without Options.Authorize every action is refused, and every page too unless
//     Options.PublicRead: mounting the handler shows nothing and changes nothing by default.
//     Options.ReadOnly, or a read-only Source, hides and refuses actions whatever Authorize
//     says.
//  3. Links are relative, so the handler works under any prefix ending in "/".
//  4. The UI decides nothing about jobs: Retry, Cancel, Pause and Resume go to the Source,
//     whose runner decides (and refuses with sluice.ErrNotDead, sluice.ErrTerminal,
//     sluice.ErrUnknownKind, ...).
//  5. Every journaled string is shown escaped (control and format characters and invalid
//     UTF-8 as visible escapes) and cut with its length stated; Options.Redact sees every job
//     first. A request's work is bounded by the handler's limits, not by what it sends.
package sluiceui
