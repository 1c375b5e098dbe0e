// Package qjobs is the job layer of the queue-backed runner, as one host with the common
// machine surface (New, Step, Ready, WakeAt, Status). It decides what a new job's first
// message is and, for each delivery of a job message, whether to run it, defer it or end it,
// and after the handler's outcome how the message leaves (deleted, hidden for the backoff,
// re-sent, or dead-lettered). Drivers (the production queue runner, the simulator's fleet)
// perform its effects and feed back the replies; leases (renewals, drops) stay the worker
// machine's.
//
// Rules:
//  1. Enqueue: a zero or past due is now; a later due is the job's not-before time, and its
//     first message is delayed until then, at most DelayMax (the wait is clamped before it is
//     rounded up to whole seconds, so any due, year 9999 included, gives a delay in range).
//     A job whose message (body and attributes) exceeds MessageMax, or whose attributes are
//     invalid, is refused with every other job of its Enqueue: nothing is sent.
//  2. Deliver: a message without valid job attributes is not a job: it is sent to the
//     dead-letter queue as it came, then deleted. A job is admitted (rule 5) and either runs or
//     leaves by a send.
//  3. AttemptDone: an attempt whose context was cancelled (lease lost, process stopping) and
//     did not succeed is abandoned: its probe is given back, nothing is sent, and the queue
//     redelivers the message (the attempt counts). Otherwise its outcome decides (rule 6).
//  4. SendDone: a re-send or dead letter that failed leaves the original hidden for
//     SendRetryDelay, to be decided again; one that succeeded deletes the original. The
//     original is never deleted before its successor is sent.
//  5. Admission, in order: before its not-before time, or of a kind this process has not
//     registered, the job is deferred (re-sent with the attempts made, delayed, none spent);
//     at or past its deadline, or with its attempts spent, it is dead-lettered; if its
//     target's breaker refuses, it is deferred until the breaker may admit; else it runs.
//  6. Outcome: a success deletes; a permanent failure or a panic dead-letters; a retryable
//     failure waits for the policy's next due time, hidden while the queue's visibility limit
//     (from the delivery) holds it, else re-sent with its attempts and not-before time; a
//     spent budget or a passed deadline dead-letters.
//
// Invariants:
//   - A job's attributes travel as the message's attributes (Encode, Decode); its body is the
//     payload untouched. A message without the kind attribute is not a job.
//   - A job's attempt number is the attempts its message says were made before it was sent
//     plus the delivery's receive count: a delivery that ran nothing (a defer, an early
//     delivery) is re-sent with the count of attempts actually made, so it spends none. A
//     delivery lost to a crash or a lost lease counts as an attempt: the budget is never
//     exceeded, only under-used, by failures.
//   - No attempt starts once the job's budget is spent or at or after its deadline (first due
//     plus Deadline); such a delivery is dead-lettered with the last error it carries.
//   - An attempt starts only if its target's breaker in this process admits it; a probe is
//     recorded by its outcome or given back by its abandonment, never both.
//   - Every send's delay is whole seconds in [0, DelayMax]; a defer before the not-before
//     time is delayed min(DelayMax, the time left), so a job waiting for a due T ahead is
//     re-sent without running at most ceil(T/DelayMax) times for it.
//   - Each delivery has at most one effect outstanding and ends with exactly one Done.
package qjobs
