// Package qjobs is the job layer of the queue-backed runner: a pure machine that decides, for
// each delivery of a queue message carrying a job, whether to run it, defer it or end it, and
// after the handler's outcome how the message leaves (deleted, hidden for the backoff, re-sent,
// or dead-lettered). The driver executes the returned Plan; leases (renewals, drops) stay the
// worker machine's.
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
//     recorded by Finish or given back by Abandon, never both.
//   - A retry hides the message only while the queue's visibility limit, counted from the
//     receive, can hold the backoff; beyond it the job is re-sent with its attempt count and
//     not-before time, and the original deleted.
package qjobs
