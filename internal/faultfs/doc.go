// Package faultfs wraps any core.FS (adapters/osfs on a real directory included) with
// composable faults, in the spirit of pebble's errorfs and of LazyFS: it injects errors by
// operation and file name, and it tracks what the wrapped file system has made durable, so
// that a simulated power cut can drop, tear or reorder everything that was not, on the real
// files.
//
// Model. Every write goes through to the wrapped FS at once (reads see it). Beside it, the
// wrapper keeps, per file (an inode: a name may move), the contents made durable and the
// writes and truncates made since, in order; and for the directory, the entries made durable
// and the creates, renames and removes made since.
//
// Rules:
//
//  1. Durable data. A File.Sync that returns nil makes every earlier write and truncate of
//     its file durable; a SyncDir that returns nil makes every earlier create, rename and
//     remove durable. Nothing else does: the core.FS contract, whatever the wrapped FS does
//     on its own (osfs fsyncs the directory inside Create and Rename).
//  2. Observed syncs (Options.Observed). The wrapped FS also reports each sync system call it
//     really made (osfs's Options.Synced, wired to Observe and ObserveDir). A Sync or SyncDir
//     then counts only if such a report came during the call: a wrapped FS whose Sync skips
//     fdatasync, or whose SyncDir skips the directory's fsync, makes nothing durable. Rules 1
//     and 2 together hold the caller to the contract and the wrapped FS to its word.
//  3. Power cut. CutAfter(n) makes the n-th mutating operation from now (Create, Rename,
//     Remove, SyncDir, Write, WriteAt, Sync, Truncate; Ops counts them) and every later one
//     fail with ErrPowerCut, without reaching the wrapped FS. PowerCut(rng) then closes every
//     file, decides what the disk kept and rewrites the wrapped FS to it: the durable entries
//     plus an in-order prefix of the later directory changes (a journaling file system
//     commits metadata in order); each file's durable contents plus, for each later change
//     independently, its fate: a write lost, kept, torn (a strict prefix, then garbage
//     bytes up to the end of its 512-byte sector, never past the write's own end), zeroed
//     (the size reached the disk, the data did not) or, across sectors, scattered (each
//     sector-aligned piece kept or lost); a truncate applied or not. A later write can so
//     persist while an earlier one does not. Synced data is never touched.
//  4. After PowerCut, every File opened before fails with ErrPowerCut, everything on disk is
//     durable, and the FS takes calls again, as after a restart. Exit closes the Files the
//     same way and leaves the disk as it is (a process that ended).
//  5. Errors (Inject). A Rule fails operations by kind and file name: the n-th match, or each
//     with a probability drawn from the rule's own seeded stream. A failure comes before the
//     operation takes effect, or, with Rule.After, after it (a Create, Rename or Remove that
//     happened, a write that landed, a Sync whose result is unknown: not counted durable).
//     A failed Sync leaves its changes pending, and a later Sync that succeeds makes them
//     durable: the writes a kernel drops after a failed fsync are sim/disk's to model.
//  6. Determinism: every random draw comes from the *rand.Rand handed in (PowerCut) or the
//     rule's seed; files are visited in sorted name order, never in map order.
//
// The wrapped FS's own crash semantics are not modelled: PowerCut writes the state a power
// cut may leave through the wrapped FS and syncs it, so a restarted process finds it on the
// real disk. Operations are serialised by one mutex (a File's Sync may run on another
// goroutine, as the journal's pipelined commit does).
package faultfs
