// Package pool bounds the attempts running at once (SPEC 2.4).
//
// Rules:
//
//  1. A Pool has Capacity units; Acquire takes one when free and reports whether it did.
//  2. Release gives one back; releasing more than was acquired is misuse and panics.
//
// Invariant: 0 ≤ used ≤ capacity.
package pool
