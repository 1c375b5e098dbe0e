// Package core holds the ports that sluice's machines and engines talk through, and, in its
// sub-packages, the pure deterministic machines themselves (journal, retry, breaker, pool,
// runner, lease, worker).
//
// Invariants of everything under core/:
//
//  1. No wall clock: time arrives as an input (`now`); no time.Now, time.Sleep or timers.
//  2. No goroutines, channels, select, sync, os, net, global math/rand, the AWS SDK or
//     benbjohnson/clock. Randomness arrives as a seeded *rand.Rand or as a number in an event.
//     No context in a machine either: only a port definition (a file of this package, such
//     as transport.go) may import context, because a port method that does I/O takes one.
//  3. Every write, send, timer and job start leaves a machine as an effect value, or goes
//     through a port defined here (FS, Transport), so the simulator can see and fault it.
//  4. No Go map is iterated where the order can reach output, state or a random stream.
//
// purity_test.go walks the AST of core/ and holds rules 1 and 2.
//
// # One machine surface
//
// Every machine (runner, lease, worker, breaker, pool) has the same shape, after etcd-io/raft's
// RawNode:
//
//	func New(cfg Config) (*Machine, error) // validates cfg; no I/O; never panics on bad config
//	func (m *Machine) Step(ev Event) error // one pure transition; an error only for misuse
//	func (m *Machine) Ready() Ready        // the effects decided since the last Ready
//	func (m *Machine) WakeAt() time.Time   // when the machine next needs a Tick; zero: never
//	func (m *Machine) Status() Status      // a read-only copy for callers, tests and checkers
//
// The contract around them:
//
//   - New's error wraps the package's ErrConfig and names the Config field at fault, so a
//     public API can name the field its user set.
//   - Events are a sealed set of types in the package. Each carries the time it happened in a
//     field named Now (for a reply: when the reply arrived); a Step with a zero Now is misuse.
//     A misused Step leaves the machine as it was.
//   - Ready hands out the effects and forgets them: it is the machine's one channel for them.
//     Its fields say in which order to perform them. An effect counts as done once handed
//     out: from then on the machine waits for the event that answers it (every call gets
//     exactly one reply event, every started handler or attempt exactly one outcome), and
//     never hands it out again. Call Ready after a Step, or after a burst of Steps for events
//     already waiting (effects decided in the burst then share batches), before time moves on.
//   - WakeAt is read after Ready; the driver re-arms one timer for it and steps a Tick (whose
//     Now is the clock's time) when it fires. The machine tolerates early and late ticks.
//   - Status is O(1) or close to it and copies everything it returns.
//   - Each machine has checkInvariants() error, run by its tests after every step and by the
//     simulator through an exported CheckInvariants.
//
// "Engine" names only an I/O layer over a machine (the runner's journal engine, which owns a
// file system port). A machine performs no I/O and never blocks; its drivers (the root
// package in production, sim/ in the simulator) only perform effects and feed back replies:
// any decision that reads state is the machine's, so both drivers run it.
package core
