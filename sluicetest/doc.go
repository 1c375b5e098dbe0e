// Package sluicetest tests a user's own job handlers, as written for production, under seeded
// crashes, disk faults, graceful stops and faulty downstream services.
//
// A Scenario names the handler (built by Setup over simulated Services), the sluice.Config and
// codec the program uses, a Workload that plans enqueues, cancels and retries over simulated time,
// and the Invariants that must hold. Check runs it for many seeds as subtests of a go test; a
// failure prints the seed, the broken invariant, a shrunk reproduction with its replay token and
// the path of a timeline file. Find runs the same sweep without a *testing.T.
//
// The simulated world executes core/runner's Node, the host the production runner executes, over
// sim/disk on the simulator's event loop (sim.Loop), with the faults of the simulator's presets
// (sim/faults: the disk profile's for the runner, the network profile's for a worker): a batch's sync lands as an event of the instant it was written
// (what that instant still steps goes into the next batch), and a graceful stop is the Node's
// (admission off, the graces, a flush, a compaction when CompactOnClose, close). It runs Config
// as a Runner does, through the same code (its defaults and checks, AgeMax, the middleware
// around every attempt, every hook), but for Logger, Clock and Seed, which are the world's, and
// Capacity 0, which means 4. Each attempt's handler runs on its own goroutine, but
// only one goroutine runs at a time: a handler yields to the world whenever it calls a Service,
// and resumes when the world's clock reaches the call's completion. So:
//
//  1. A run is a pure function of its seed and knobs: the same seed gives the same timeline,
//     byte for byte (Check verifies this on the first seed of a sweep and says what broke it).
//  2. A Service call takes effect on the server at its completion time, whatever happened to
//     the caller since: a crash, a cancellation or a graceful stop between the effect and the
//     journaled outcome is exactly the window where at-least-once delivery repeats the effect.
//  3. A crash kills every running handler at its current Service call (the goroutine exits
//     through runtime.Goexit; deferred calls run, and Service calls from them fail) and cuts the
//     disk as a power cut would; the process restarts later over what the disk kept.
//  4. A Service refuses a call whose attempt's context is done, as a real client does; a call
//     issued by an attempt after its job's cancellation was acknowledged is reported by the
//     NoEffectAfterCancel invariant (for example a handler using context.WithoutCancel).
//  5. After the Horizon no new fault is drawn (a crash armed inside a commit before it may
//     still fire at the next commit), the process is restarted if it is down, and the run
//     continues until every job settles (or StepsMax), then the invariants run with
//     View.Final true.
//
// CheckWorker and FindWorker do the same for a queue worker's handler: core/worker's Node, the
// host the production Worker runs, with the handler called as NewWorker calls it (middleware,
// hooks), against sim/queue over a network with latency, failed calls and lease-losing
// delays, with worker crashes and graceful shutdowns.
//
// Plain helpers need no simulation: RunJob runs one attempt of a handler with FakeJob, WithNow
// fixes what Now reads, Recorder records what code enqueues (RequireEnqueued compares it), and
// DrainDue works what is due now on a real runner with a mock clock.
//
// What it cannot see: goroutines a handler starts (their calls race the world), real network
// calls, real sleeps and timers, and the wall clock. Read time with Now(ctx) and talk to the
// outside world through Services (behind the same interface as production's clients); a
// handler that blocks outside them is reported after a wall-clock watchdog.
package sluicetest
