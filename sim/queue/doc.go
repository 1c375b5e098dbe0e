// Package queue is a deterministic in-memory SQS (a standard queue) for the simulator and for
// tests: every state method takes `now`, nothing reads a clock, and the only randomness is the
// *rand.Rand given to New (used only by the Mixed lapse mode).
//
// Rules (what the queue promises its callers):
//
//  1. Send stores a message with an id "<name>-<seq>" (seq 1, 2, ... never reused). It is
//     visible at once.
//  2. Receive(now, max, visibility) returns up to max (1..10) messages visible at now
//     (visibleAt <= now), in order of (visibleAt, seq). Each delivery gets a NEW receipt
//     "<name>/<seq>/<count>", increments ReceiveCount, and hides the message until
//     now + visibility (the queue's default when 0). Receive is instantaneous: long polls are
//     the world's business, which schedules them with NextVisibleAt.
//  3. Redrive: with a dead-letter queue and MaxReceiveCount N > 0, a receive that would make a
//     message's count exceed N moves it to the dead-letter queue instead (same id and body,
//     its count carried over) and does not deliver it.
//  4. A receipt is current until the message's next delivery, its deletion or its move to the
//     dead-letter queue; after that it is stale. Errors are *core.TransportError:
//     - unparseable or another queue's receipt: Gone ReceiptHandleIsInvalid;
//     - ChangeVisibility on a stale receipt: Gone ReceiptHandleIsInvalid; on a deleted or
//     dead-lettered message: Gone MessageNotInflight;
//     - Delete on a stale receipt: Gone ReceiptHandleIsInvalid (or success doing nothing with
//     Config.StaleDelete = StaleDeleteIgnored, as AWS documents); on a message already deleted
//     through its current receipt: success (deletes are idempotent).
//  5. ChangeVisibility(now, receipt, t) on a current receipt whose message is in flight sets
//     visibleAt = now + t (t truncated to whole seconds; 0 releases at once). A deadline past
//     the ceiling (12 h from the first receipt of this delivery) or a negative t fails with
//     Fatal InvalidParameterValue and changes nothing.
//  6. A current receipt whose window lapsed (visibleAt <= now) but which was not redelivered:
//     Delete deletes the message (SQS does). ChangeVisibility answers per Config.Lapsed:
//     LapsedGone (Gone MessageNotInflight), LapsedIgnore (success, nothing changes: the case
//     the lease controller's "trust the local deadline" rule exists for), LapsedExtend
//     (success, hidden again as in rule 5), or LapsedMixed (one of the three drawn from rng).
//  7. Batch calls take 1..10 entries and answer one error per entry, in entry order, each
//     entry handled exactly as its single call would be, in order.
//  8. Misuse panics: max outside 1..10, a negative or over-ceiling receive visibility, an
//     empty or oversized batch, LapsedMixed without an rng.
//
// Invariants (checkInvariants, exported as CheckInvariants for the simulator):
//
//   - every live message (not deleted, not dead-lettered) is in the heap exactly once and the
//     heap is ordered by (visibleAt, seq); no other message is in it;
//   - a message never received has count 0, no receipt and was never hidden;
//     a received one has receipt "<name>/<seq>/<count>" and receivedAt <= visibleAt <=
//     receivedAt + 12 h;
//   - deleted and dead-lettered are exclusive; dead-lettered only with a dead-letter queue
//     and only when count >= MaxReceiveCount.
//
// The queue has a single owner: it is not safe for concurrent use.
package queue
