// Package pool bounds the attempts running at once (docs/runner.md).
//
// Rules:
//
//  1. A Pool has Capacity units (New refuses a Capacity < 1). Step(Acquire{}) takes one when
//     free, and Ready().Granted says whether it did: that answer decides.
//  2. Step(Release{}) gives one back; releasing more than was acquired is misuse and panics.
//  3. The pool has the machines' surface (New, Step, Ready, Status) but no WakeAt: it has no
//     timers, and nothing asks a pool when to wake.
//
// Invariant: 0 ≤ used ≤ capacity.
package pool
