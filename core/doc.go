// Package core holds the ports that sluice's machines and engines talk through, and, in its
// sub-packages, the pure deterministic machines themselves (journal, retry, breaker, pool,
// runner, lease, worker).
//
// Invariants of everything under core/:
//
//  1. No wall clock: time arrives as an input (`now`); no time.Now, time.Sleep or timers.
//  2. No goroutines, channels, select, sync, context, os, net, global math/rand, the AWS SDK or
//     benbjohnson/clock. Randomness arrives as a seeded *rand.Rand or as a number in an event.
//  3. Every write, send, timer and job start leaves a machine as an effect value, or goes
//     through a port defined here (FS, Transport), so the simulator can see and fault it.
//  4. No Go map is iterated where the order can reach output, state or a random stream.
//
// purity_test.go walks the AST of core/ and holds rules 1 and 2.
package core
