// Package disk is a crashable in-memory disk implementing core.FS, faithful to what a real
// disk and file system may leave behind after a power cut, and deterministic: the same seed and
// the same operations give the same bytes.
//
// Model. The disk is one flat directory. Each file (an inode) keeps its durable contents plus
// the list of writes and truncates made since; the directory keeps its durable entries plus the
// list of creates, renames and removes made since the last SyncDir. Reads see everything.
//
// Rules:
//
//  1. File.Sync makes every earlier write and truncate of that file durable. A truncate (and the
//     truncation done by Create of an existing name) is a change to the file, made durable by
//     File.Sync, not by SyncDir.
//  2. SyncDir makes every earlier create, rename and remove durable. Until then a crash rolls
//     them back: a created file vanishes (even if its data was synced), a renamed file is back
//     under its old name, a removed one is back (with faults.Disk.DirPersist above zero an
//     in-order prefix of them may survive instead, as on a journaling file system).
//  3. At Crash each write not yet made durable is, independently and by the seeded stream,
//     lost, kept, torn (a strict prefix persists, followed by 0 or more garbage bytes that
//     never pass the end of the 512-byte sector the prefix ends in, nor the write's own end
//     when a later change of the file was synced, fixing its size, or when it was a WriteAt
//     over bytes inside the file), zeroed (the size reached
//     the disk, the data did not: the range reads as zeros) or, when it spans more than one
//     sector, scattered (each sector-aligned piece kept or lost on its own). So a
//     later write or sector can persist while an earlier one does not; holes read as zeros.
//     An unsynced truncate is applied or not. Synced data always survives (but see BitFlip).
//  4. A Sync that fails leaves the writes it should have covered undecided: their fate is
//     drawn at the crash, even if a later Sync on the file succeeds (fsyncgate: never retry
//     fsync). A SyncDir that fails leaves the directory changes undecided likewise, until a
//     later SyncDir succeeds.
//  5. After Crash every File opened before fails with ErrCrashed; the disk holds what a
//     restarted process would find.
//  6. CrashAfter(n) makes the n-th mutating operation from now (write, sync, truncate, create,
//     rename, remove, syncdir; counted by Ops) and all later ones fail with ErrCrashed, without
//     effect, until Crash. Reads keep working.
//  7. FailNext queues one deterministic failure for the next operation of a kind; probabilities
//     in faults.Disk add random ones. A failed operation has no effect, except a random write
//     fault, which appends a random strict prefix first (a short write). faults.Disk.ShortWrite
//     writes such a prefix and reports its count without an error (a port breaching
//     io.Writer), from a stream of its own. Cut and FlipBit damage settled (synced) data.
//  8. A missing file is reported with errors.Is(err, fs.ErrNotExist); a name with a separator,
//     empty, "." or ".." with fs.ErrInvalid; a closed File with fs.ErrClosed.
//
// Invariants (checkInvariants): applying a file's pending changes to its settled contents gives
// what reads see; no change is both synced and undecided; replaying the directory log over the
// durable entries gives the live ones.
//
// Determinism: all randomness comes from one *rand.Rand seeded by New; names are visited in
// sorted order, never in map order. The Disk is safe for use by several goroutines, but the
// simulator drives it from one.
package disk
