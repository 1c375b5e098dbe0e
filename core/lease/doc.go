// Package lease is the lease controller of docs/worker.md: a pure machine that keeps every held queue
// receipt's visibility window renewed from receipt until its disposition, over any number of
// receipts with one timer heap. It performs no I/O: calls leave as effects (ChangeVisibility,
// Delete) carrying a CallID, replies come back as events (RenewResult, DisposeResult) stamped
// with the time they arrived (Now), and the driver re-arms one timer at WakeAt. It has the
// machine surface of package core: New, Step, Ready, WakeAt, Status.
//
// Arithmetic (docs/worker.md; t0 the stamp read before the receive call, W the window, C the
// ceiling, d the local deadline, initially t0+W):
//
//	renewAt(now, d)   = now + max(0, d−now)/3
//	retryUntil(W, d)  = d − W/10                   a renewal is sent only strictly before it
//	request(now)      = min(W, floor(t0+C−now))    whole seconds; none when < 1 s is left
//	after success     d = sentAt + requested       sentAt read before the request was sent
//	stop(d)           = d − M                      M the stop margin, default min(1 s, W/20), < W/10
//
// Rules:
//
//  0. No call about a receipt outlives its lease: every call effect carries a Deadline the
//     driver applies to the call's context: retryUntil of its earliest entry for a renewal
//     (so a disposition waiting behind it keeps W/10 − M for its turn), the earliest stop
//     point for a disposal. Past the stop point a receipt is no longer ours: its handler is
//     cancelled there, a margin before the queue's own deadline.
//  1. A received receipt is held with d = t0+W and a renewal scheduled at renewAt(reply, d).
//     If the reply arrived at or after stop(d), it is dropped at once (late): nothing, not
//     even a release, is sent for it.
//  2. A renewal is sent at its scheduled time only if now < retryUntil(W, d) (else drop:
//     margin) and request(now) exists (else drop: ceiling). It asks for request(now). A
//     margin reached because the ceiling clipped the last grant is reported as ceiling.
//  3. Renewals due at the same step go out together in ChangeVisibility effects of at most 10
//     entries. A first-attempt renewal due within min(Coalesce, W/10) of a batch that is going
//     out anyway rides along early (Coalesce defaults to 250 ms); retries keep their pacing.
//  4. A success reply arriving before stop(d) (and before the stop point it buys) sets
//     d = sentAt + requested and schedules the next renewal at renewAt(reply, d). A later
//     success drops the receipt (late): the queue may answer success to an extension of a
//     lapsed window and do nothing.
//  5. A retryable failure schedules a retry after the pacing delay (200 ms, 500 ms, 1 s, then
//     1 s repeated), counted per round and reset by a success, as long as that send is before
//     retryUntil; otherwise the receipt is dropped (margin) when the failure arrives.
//  6. A gone fault drops at once; a fatal fault drops at once and is logged at Error.
//  7. If stop(d) passes while a renewal is unanswered, the receipt is dropped (expired): the
//     machine never considers a receipt held past the stop point its last success bought.
//  8. A drop emits CancelHandler for that receipt only (its handler is cancelled if running
//     and skipped if not started) and sends nothing for it, ever.
//  9. Dispose stops renewals. If a renewal of the receipt is in flight, the disposition waits
//     for its reply: success, or a retryable failure before stop(d) → the disposition call
//     goes out; gone, fatal, late or expiry → drop instead, counted in Status.WaitLost. After
//     the disposition call, no renewal names the receipt. Ack
//     becomes Delete (batched); Release(after) and TerminalBackoff (300 s) become
//     ChangeVisibility with Purpose Disposal (batched, timeout rounded up to whole seconds
//     and clipped to the ceiling); Abandon sends nothing. A disposition arriving at or after
//     stop(d) is not performed (drop: expired). A second disposition is misuse (ErrDisposed).
//  10. A disposition call failing retryably (a class it does not know included) is sent
//     again after the renewal pacing, counted per disposition, while that send is before
//     retryUntil(W, d); renewal stays stopped. A release or terminal backoff is retried only
//     while its first call, had it taken effect with its answer lost, would still hide the
//     message (before decided + timeout; so a release at once is never retried): a retry
//     must not name a receipt whose message another consumer may hold. Success, gone, fatal, or the margin reached
//     ends the lease; a failure is then logged once at Warn and reported in Ended.Err.
//  11. Shutdown drops every receipt without a disposition; dispositions under way (also one
//     waiting on a renewal or a retry) complete. The machine stays usable for receipts
//     received later. A call in flight none of whose receipts is held any more is abandoned
//     (Ready.Abandon): its context may be cancelled and nothing waits for its reply.
//  12. Ready is the one channel for effects: it builds the calls from everything decided
//     since the last Ready, so a caller that steps a burst of events before one Ready gets
//     shared batches, and hands out the drops (Cancel) and ended leases (Ended) with them.
//
// Limits: ReceiptsMax receipts (default 2^20; Received beyond it is refused with ErrFull);
// batch calls carry at most core.BatchMax entries; Step, Ready's bookkeeping and Status are
// O(log n) or better per receipt acted on, CheckInvariants is O(n).
//
// Invariants (checkInvariants): the heap is ordered and indexed; a held receipt is in the
// heap at its next send, a renewing or waiting one at its stop point, a disposing one only
// while a retry waits (before retryUntil, with no call in flight); every held receipt's stop
// point is after now and its deadline no later than t0+C; a receipt is in at most one call
// in flight, and each call counts the held receipts naming it; the disposing counter
// matches.
//
// Times are stored as nanosecond offsets from the first event's time, computed with
// time.Time.Sub, so monotonic clock readings rule and a wall-clock step never moves a lease.
// One Machine serves one queue (one Transport); it is single-owner and not safe for
// concurrent use.
package lease
