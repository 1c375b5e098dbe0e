// Package sluice runs background jobs without losing them, and works SQS-style queues under
// leases. A Runner (New) keeps its jobs in a write-ahead journal in a directory; Register
// adds a kind of job and returns its typed handle, a Kind (Open is New plus one kind). A
// Kind's Enqueue returns once the job is on disk, a crash loses nothing acknowledged, and
// failed attempts are retried with backoff behind a circuit breaker per target. A QueueRunner
// (NewQueueRunner) runs the same kinds from an SQS queue across a fleet. A Worker receives
// messages from a queue (Amazon SQS through adapters/sqs) and keeps each one hidden while its
// handler runs.
//
// The smallest program:
//
//	type Email struct{ To, Subject string }
//
//	func main() {
//		r, err := sluice.Open("jobs", sluice.Config{}, sluice.JSON[Email](),
//			func(ctx context.Context, j sluice.Job[Email]) error {
//				return send(ctx, j.Payload) // nil: done; else retried
//			})
//		if err != nil {
//			log.Fatal(err)
//		}
//		ctx := context.Background()
//		if _, err := r.Enqueue(ctx, time.Time{}, "smtp.example.com", Email{To: "ada@example.com"}); err != nil {
//			log.Fatal(err)
//		}
//		log.Fatal(r.Run(ctx)) // until ctx ends; then a graceful stop and Close
//	}
//
// The module's documentation is in its docs directory: the words and the two runners side by
// side, with a whole service (docs/concepts.md), the runner's semantics (docs/runner.md), the
// journal and its recovery (docs/journal.md), the worker's leases (docs/worker.md), the same
// jobs on SQS (docs/queue.md), what handlers return (docs/results.md), hooks, middleware and
// OpenTelemetry (docs/observability.md), operating a runner (docs/operating.md), the
// simulator (docs/simulator.md) and testing your own handlers with package sluicetest
// (docs/testing.md).
//
// What a user can rely on:
//
//  1. Durable before acknowledged: Enqueue, EnqueueMany, Cancel and Retry return only once
//     their journal record is fsynced, or with the error that refused it.
//  2. An attempt's handler runs only after its start is durable, so a job that crashes the
//     process every time still ends dead after Policy.Attempts tries; an attempt a graceful
//     stop cuts short is released, not counted.
//  3. Every decision (what to start, retry, defer, cancel; when to renew, release or delete a
//     message) is made by the pure machines in core/, which the simulator runs too; Runner,
//     QueueRunner and Worker only perform them. Hooks and middleware observe those effects and decide nothing.
//  4. Time comes only from Config.Clock (WorkerConfig.Clock), the wall clock by default.
//  5. One process holds a runner's directory at a time (a lock file); Inspect reads it
//     without the lock and writes nothing.
package sluice
