// Package sluice runs background jobs without losing them (a durable runner over a
// write-ahead journal) and works SQS-style queues under leases (a worker whose lease controller
// keeps each message hidden while its handler runs). It is the production driver of the pure
// machines and synchronous engines in core/: the only layer with goroutines, channels, select,
// context and a clock (github.com/benbjohnson/clock; clock.New() unless a test injects one).
//
// Runner contract (SPEC 2):
//
//  1. One owner goroutine per Runner makes every engine call. Enqueue, Cancel and Retry send a
//     command to it and return only when the engine's commit that covers the command's record
//     has returned from fsync (durability is an event), or with the error that refused it.
//  2. Group commit: the owner blocks for one command, outcome or timer, then takes everything
//     else already waiting (up to gatherMax) into the same commit: one journal batch, one fsync.
//     SyncEveryRecord turns the gathering off (one commit per command or outcome, and one for
//     the Started records it admits: about one fsync per record).
//  3. Attempts start only while Run or Drain is active, and only as the engine returns them
//     (their Started record durable). Each runs its handler on its own goroutine with a context
//     that Cancel, the end of shutdown's grace, and Close cancel. Panics become Panicked.
//  4. An outcome goes back to the owner and into the next commit; the engine ignores a stale
//     token (cancelled job). Nothing an attempt reports after Close is recorded: the next Open
//     requeues that attempt as interrupted.
//  5. A failed commit (a poisoned journal), or a durable one after which the engine is
//     poisoned (a compaction lost after its rename), fails every waiting and later command
//     with the first failure, cancels running handlers and stops dispatch at once; Run and
//     Drain return it.
//     Recovery is Close and Open again (the disk is the truth).
//  6. Time comes only from Config.Clock: one timer, set to the engine's next wake time.
//  7. Run: dispatch until ctx ends, then stop starting attempts, wait up to Grace for running
//     ones, cancel the rest, Close (which waits up to Grace again for their outcomes). Drain:
//     dispatch until the engine is idle (nothing waiting, deferred or running).
//  8. Open takes an flock on dir/LOCK, so two processes never append to one journal.
//
// Invariants of the owner (checkInvariants, after every commit): at most Capacity attempts
// run; no read is left unanswered after a commit; and, in tests only (O(running + pending),
// kept off the commit path): every running attempt is filed under its job id with a cancel
// func, and every pending command has a reply channel.
package sluice
