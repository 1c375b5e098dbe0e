// Package qjobs is the job layer of the queue-backed runner, as one host with the common
// machine surface (New, Step, Ready, WakeAt, Status). It decides what a new job's first
// message is and, for each delivery of a job message, whether to run it, defer it or end it,
// and after the handler's outcome how the message leaves (deleted, re-sent, or
// dead-lettered). Drivers (the production queue runner, the simulator's fleet) perform its
// effects and feed back the replies; leases (renewals, drops) stay the worker machine's.
//
// Rules:
//  1. Enqueue: each job gets an id (63 random bits from Config.IDs, never 0). A zero or past
//     due is now; a later due is the job's not-before time, and its first message is delayed
//     until then, at most DelayMax (the wait is clamped before it is rounded up to whole
//     seconds, so any due, year 9999 included, gives a delay in range). A job whose message
//     exceeds MessageMax less SuccessorRoom, or whose attributes are invalid, is refused with
//     every other job of its Enqueue: nothing is sent. On a FIFO queue the id is the send's
//     deduplication id, the group is the job's (else its id), and no send is delayed.
//  2. Deliver: a message without valid job attributes is not a job: it is sent to the
//     dead-letter queue as it came (body and every attribute with its type), then deleted.
//     A job is admitted (rule 5) and either runs or leaves by a send.
//  3. AttemptDone: an attempt whose context was cancelled (lease lost, process stopping) and
//     did not succeed is abandoned: its probe is given back, nothing is sent, and the message
//     is released (at once after a graceful stop, whose worker holds the lease; after its
//     window otherwise). It spends no attempt: its next receive counts one lost delivery.
//     Otherwise its outcome decides (rule 6).
//  4. SendDone: a re-send or dead letter that failed leaves the original hidden for
//     SendRetryDelay doubled per earlier receive, at most SendRetryMax, to be decided again;
//     one that succeeded deletes the original. The original is never deleted before its
//     successor is sent. A successor that cannot fit the queue even after the fit ladder
//     (the error cut; a re-send drops other producers' attributes) is not sent: the
//     original is hidden the same way and counted (Stats.Unsendable).
//  5. Admission, in order: before its not-before time, or of a kind this process has not
//     registered, the job is deferred (re-sent with the attempts made, delayed, none spent;
//     on FIFO, a wait for the not-before time hides the message); past its delivery budget
//     (LostMax lost deliveries) it is dead-lettered (deliveries-lost); at or past its
//     deadline, or with its attempts spent, it is dead-lettered; over a flow limit of this
//     process (rule 7) it waits; if its target's breaker refuses, it is deferred until the
//     breaker may admit; else it runs.
//  6. Outcome: a success deletes; a permanent failure or a panic dead-letters; a retryable
//     failure re-sends the job with the attempt, its error and the policy's next due time as
//     its not-before time (delayed up to DelayMax); a spent budget or a passed deadline
//     dead-letters. An attempt that ran past its Run.Timeout (AttemptDone.TimedOut) is judged
//     by its outcome, which the driver makes as the local runner does (a retryable failure
//     naming the timeout; Permanent stays permanent), and counted in Stats.TimedOut.
//  7. Flow (flow.go): a kind's Rate, KeyRate and KeyLimit hold in this process only, with
//     buckets empty at its first delivery. A delivery whose key has a slot and whose rates
//     allow a start within HoldMax runs, held until then (Run.Delay). Otherwise it is no
//     attempt: on a standard
//     queue it is re-sent (WhyWait) with a delay until the token (for a key at its limit, a
//     slot) is expected, waiters spread one interval (slot) apart, its Attrs.Waits counted
//     and bounded by WaitMax (then dead-lettered, flow-waits); on a FIFO queue it is hidden
//     (its group keeps its order), a receive counted as a lost delivery.
//
// Invariants:
//   - A job's attributes travel as the message's attributes (Encode, Decode); its body is the
//     payload untouched. A message without the kind attribute is not a job.
//   - Two budgets. Attempts count handler outcomes only: every outcome but a success sends
//     the job on, its message carrying the attempts made and the last error, so a delivery's
//     attempt number is Attrs.Attempts+1 whatever happened to earlier deliveries. A delivery
//     that ends without an outcome (a crash, a lost lease or receive answer, a stop, a failed
//     send) shows as its message's receive count: lost deliveries are Attrs.Lost plus the
//     receive count less one (less the waits of a FIFO message), bounded by LostMax.
//   - No attempt starts once the job's budget is spent or at or after its deadline (first due
//     plus Deadline); such a delivery is dead-lettered with the last error it carries.
//   - A dead letter keeps the body and every attribute of other producers as they came, and
//     carries the reason, the attempts, the lost deliveries and the handler's last error.
//   - An attempt starts only if its target's breaker in this process admits it; a probe is
//     recorded by its outcome or given back by its abandonment, never both.
//   - Every send's delay is whole seconds in [0, DelayMax]; a defer before the not-before
//     time is delayed min(DelayMax, the time left), so a job waiting for a due T ahead is
//     re-sent without running at most ceil(T/DelayMax) times for it.
//   - A message whose successor keeps failing to send comes back ever more rarely (rule 4),
//     never every second forever.
//   - Each delivery has at most one effect outstanding and ends with exactly one Done.
//   - A flow key's running count is its Runs not yet answered, never above KeyLimit; over any
//     window the starts of a kind (of a key) in one process are at most Rate.Allowed
//     (KeyRate.Allowed), across restarts too.
package qjobs
