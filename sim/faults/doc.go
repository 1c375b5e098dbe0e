// Package faults holds the fault models the simulator injects (docs/simulator.md): what can go wrong and
// with which probability, as plain data. The world in package sim draws from these models with
// its own seeded streams; nothing here holds state or randomness of its own.
//
// Rules:
//
//  1. A model is a value: probabilities in [0, 1] per opportunity (per call, per step, per
//     operation) and duration ranges. The zero value injects nothing.
//  2. Drawing takes the caller's *rand.Rand and consumes a fixed number of values per draw, so
//     that turning one fault kind on or off does not shift the draws of later opportunities.
//  3. Profiles (profile.go) pin a fault mix by name; the "swarm" profile lets the seed choose.
//  4. The disk model (disk*.go) belongs to the simulated disk's owner; identifiers of the other
//     models never start with Disk.
//
// Invariant: every probability a model holds is in [0, 1] and every range has Min <= Max
// (Validate reports the first that is not).
package faults
