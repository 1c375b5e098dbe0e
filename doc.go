// Package sluice runs background jobs without losing them (a durable runner over a
// write-ahead journal) and works SQS-style queues under leases (a worker whose lease controller
// keeps each message hidden while its handler runs). It is the production driver of the pure
// machines and synchronous engines in core/: the only layer with goroutines, channels, select,
// context and a clock (github.com/benbjohnson/clock; clock.New() unless a test injects one).
//
// Runner contract:
//
//  1. One owner goroutine per Runner drives core/runner's Engine, and decides nothing: it
//     submits commands and outcomes, commits, and performs what the commit's result says
//     (acknowledge, start, cancel, wake; at a stop: flush, compact, close). Enqueue, Cancel and
//     Retry return only when the commit that covers the command's record has returned from
//     fsync (durability is an event), or with the error that refused it. Zero due times, the
//     record size limit, undecodable payloads (the engine's decode-check port, fed by the
//     Codec) and which handlers to cancel are all the engine's decisions, which the simulator
//     runs too.
//  2. Group commit: the owner blocks for one command, outcome or timer, then takes everything
//     else already waiting (up to gatherMax) into the same commit: one journal batch, one fsync.
//  3. Attempts start only while Run or Drain is active, and only as the engine returns them
//     (their Started record durable). Each runs its handler on its own goroutine with a context
//     that the engine's cancels end: context.Cause is ErrJobCancelled (Cancel) or ErrShutdown
//     (a stop's grace passed). Panics become Panicked.
//  4. A stop (Run's context ends, Drain's context ends, Close) turns admission off; the engine
//     waits Grace for running attempts, cancels those left, and waits Grace again. An attempt
//     the stop cancelled that does not succeed is released: journaled as such, the job waits
//     again at its due time, the attempt is not counted, the breaker records nothing. One
//     still running after that is abandoned (its outcome ignored; the next Open counts it as
//     interrupted, as after a crash). Close then flushes, compacts if CompactOnClose, and
//     closes the journal.
//  5. A failed commit (a poisoned journal), or a durable one after which the engine is
//     poisoned (a compaction lost after its rename), fails every waiting and later command
//     with the first failure, cancels running handlers and stops dispatch at once; Run and
//     Drain return it. Recovery is Close and Open again (the disk is the truth).
//  6. Time comes only from Config.Clock: one timer, set to the engine's next wake time.
//  7. Open takes an flock on dir/LOCK, so two processes never append to one journal. Inspect
//     takes no lock and writes nothing (see docs/journal.md for the journal's clean-close mark).
//  8. Stats after Close returns the values at close.
//
// Invariants of the owner (checkInvariants, after every commit): at most Capacity attempts
// run; no read is left unanswered after a commit.
package sluice
