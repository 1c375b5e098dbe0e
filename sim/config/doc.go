// Package config is a simulator run's whole configuration (docs/simulator.md): what the
// seed's "swarm" stream draws, what a fault profile pins, and the shrink tokens that override
// a drawn configuration for a replay. It holds the named random streams every part of a run
// draws from.
//
// Rules:
//
//  1. New is a pure function of (seed, profile): every profile makes the same draws in the
//     same order and only pins some of them, so a seed's workload is the same under every
//     profile.
//  2. Randomness comes only from named streams, Stream(seed, name): FNV-1a 64 of the name
//     mixed with the seed by splitmix64, so adding draws to one stream never shifts another.
//  3. A token's String and ParseToken round-trip, in a fixed key order; Token.Apply validates
//     what it returns.
package config
