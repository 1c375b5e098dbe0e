// Package sim is sluice's deterministic simulator (docs/simulator.md): a single-threaded world that runs
// the production machines — runner.Engine over core/journal on sim/disk, lease.Machine against
// sim/queue — under crashes and faults, and checks named invariants after every step.
//
// Rules:
//
//  1. A run is a pure function of (seed, profile, code). Run(Options{Seed, Profile}) gives the
//     same Result, trace and digest on every run and machine: no goroutines, no wall clock, no
//     map iteration reaching output, state or a random stream, integer time formatting.
//  2. Randomness comes only from named streams, Stream(seed, name): FNV-1a 64 of the name mixed
//     with the seed by splitmix64. Each concern has its own stream ("swarm", "workload",
//     "executor", "network", "faults", "schedule", "crash-point", "damage", "forge", "breach",
//     "disk/N" (and the disk's own read-fault stream), "jitter/N",
//     "defaults/<name>", "operator/<name>", "queue"), so adding draws to one never shifts
//     another. Fault families added after the first swarm draw their rates from
//     "swarm-more" (faults.Set.PickMore), leaving every older choice of a seed where it was.
//  3. Time is simulated: a heap of events ordered by (time, sequence number) (Loop); the loop
//     jumps to the next event. Times print as offsets from Epoch. In the safety phase the
//     scheduling families (Loop.Shift) may fire an event late, bunch it to a grain, or let later
//     events of its instant overtake it; never earlier, never in the liveness phase.
//  4. The seed's "swarm" stream draws the configuration and the fault mix (sim/config); a
//     profile pins the fault mix (sim/faults.Pick). Every profile makes the same draws.
//  5. A run has a safety phase (faults on, Options.Safety long) and a liveness phase (faults
//     off) that ends when every job and message has settled, or fails at a bound computed
//     from the configuration (docs/simulator.md gives the formula).
//  6. The world reports facts to a Checker as they happen; each fact is checked at once against
//     every invariant it concerns, and state invariants are checked after every step. The first
//     violation stops the run; it is reported with its invariant's name, the last events and the
//     command that reproduces it.
//  7. Every event adds one trace line "<time> <who> <what>" to a running SHA-256; the digest is
//     the last line of every report, and corpus entries (corpus/sim) pin it. What core can
//     render (a commit's result, recovered jobs, a worker's effects and counters, a refused
//     journal's frames) is rendered by core's Describe functions, not by the world.
//  8. A run's verdict is ok, violation, incomplete (stopped at the steps max) or fault (a panic
//     inside the simulator, caught by Run with its stack): Run never panics on a seed.
//  9. Everything that renders or explains a run is in sim/explain: Report (the summary), and,
//     derived from its trace by running the seed again, Explain (the focused report),
//     WriteTimeline (the HTML page), Shrink (a search over sim/config's shrink tokens, each a
//     replayable override of the drawn configuration). Corpus files are parsed by sim/corpus.
//  10. Damaged journal images are built by sim/forge. A program's misuse of the machines' APIs
//     (bad configurations, calls a buggy driver makes) is tested in core's own packages.
//
// Invariants of the world itself: simulated time never decreases (Loop); a process's events
// from before a crash never act after it (each process counts incarnations); nothing is
// acknowledged to the checker before the engine acknowledged it.
package sim
