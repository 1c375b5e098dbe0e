// Package pool bounds the attempts running at once (docs/runner.md).
//
// Rules:
//
//  1. A Pool has Capacity units (New refuses a Capacity < 1). Step(Acquire{}) takes one when
//     free, and Ready().Granted says whether it did: that answer decides.
//  2. Step(Release{}) gives one back; releasing more than was acquired is misuse and panics.
//  3. The pool has the machines' one surface (New, Step, Ready, WakeAt, Status); it has no
//     timers, so WakeAt is always zero.
//
// Invariant: 0 ≤ used ≤ capacity.
package pool
