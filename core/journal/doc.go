// Package journal is sluice's write-ahead log: numbered records appended in sync batches to one
// file through the core.FS port, replayed in order when the file is opened. It does not know
// what records mean; callers give each record a type tag and bytes (SPEC 2.5 to 2.7).
//
// # Contract
//
//  1. Append buffers a record and assigns it the next LSN (+1 per record, from 1). Data over
//     Config.RecordMax is refused with ErrTooLarge before anything is written.
//  2. Commit writes every buffered record as ONE batch (one Write, the end flag on its last
//     frame), then one Sync, and only then returns the highest durable LSN. A record is
//     acknowledged when the Commit covering it returns nil; group commit is many Appends and one
//     Commit. Batch N+1 is never written before batch N's Sync returned.
//  3. A failed Write or Sync poisons the journal: nothing after the last good batch is
//     acknowledged, Sync is never retried, and every later call returns an error wrapping
//     ErrPoisoned and the first failure, until the journal is reopened (the disk is the truth).
//     On the failure the journal truncates the file back to its last complete batch and syncs
//     that truncation (a new change, not a retry of the failed fsync), so that the failed
//     batch's undecided bytes cannot be replayed by a reopen and then vanish in a later crash.
//     If that cut fails too, the poison also wraps ErrUndecided: reopen only after a restart.
//  4. Open runs the recovery table below and replays every record of every complete batch, in
//     LSN order, before it returns; after a compaction the first record is the snapshot
//     (Record.Snapshot). Only whole records of whole batches are ever replayed.
//  5. Compact (nothing buffered) writes a header and one snapshot frame (LSN = Durable()) to
//     <name>.compact, syncs and closes it, renames it over the journal, syncs the directory
//     and continues appending to the new file. Kept: a failure before the rename returns an
//     error and the old journal stays in use. Lost: a failure after it poisons the journal;
//     so does a Rename error with <name>.compact gone (a port such as osfs may fail after
//     renaming), since the old file may be unlinked. A crash anywhere leaves one of the two
//     files, and both replay to the same state.
//  6. A short or bad frame, or a last batch without its end flag, with no valid frame of a
//     later batch anywhere after it, is a torn tail: Open cuts it at the end of the last
//     complete batch, syncs and logs at Warn (offset, bytes dropped). Valid frames of the SAME
//     batch after a bad one are an out-of-order torn write, cut too.
//  7. A bad frame followed by a valid frame of a later batch is corruption of synced data
//     (rule 2 proves the bad frame had been synced): Open refuses with a *FormatError naming
//     the file, the offset and the LSNs around it (errors.Is ErrCorrupt) and truncates nothing.
//     So is any CRC-valid frame that does not follow on (LSN gap, batch number out of order,
//     unknown flags, a misplaced snapshot), and a damaged snapshot frame (it was synced before
//     the rename made its file visible).
//  8. A bit flip in the last batch cannot be told from a torn write: it is cut as torn.
//  9. A non-empty file with a bad header is refused (ErrBadHeader); an empty file is no journal.
//  10. A new journal is created atomically like a compaction (header to <name>.compact, sync,
//     rename, directory sync), so a crash never leaves a journal with a partial header.
//  11. Open syncs the directory before it replays an existing journal: a SyncDir that failed
//     in an earlier create or compaction left the entry undecided, and appending to a file
//     whose name may roll back would lose acknowledged records.
//
// Scan exposes Open's classification over a byte slice; it never panics (FuzzScan).
// Open reads the whole file into memory once; replayed Record.Data aliases that buffer.
//
// # Recovery table (SPEC 2.6; recoveryTable in recover.go is the same table as code)
//
//	what Open finds                                  what it does
//	-----------------------------------------------  ------------------------------------------
//	a leftover <name>.compact                        the rename did not happen: remove it, sync
//	                                                 the directory, look again (old journal)
//	no journal, or an empty file                     create it (rule 10)
//	a valid header, complete batches to the end      sync the directory (rule 11), replay
//	a short or bad frame, or a last batch without    truncate to the end of the last complete
//	its end flag, with no valid frame of a later     batch, sync, log at Warn with the offset
//	batch after it (torn, maybe out of order)        and the bytes dropped, sync the directory,
//	                                                 replay
//	a bad frame followed by a valid frame of a       refuse: error naming the file, the offset
//	later batch; valid frames that do not follow on  and the LSNs around it; truncate nothing
//	a bad header in a non-empty file                 refuse
//	jobs running at the crash                        (the runner's row: it sees them in replay)
//
// # Byte layout (format version 1, little-endian)
//
//	header (20 bytes)
//	+--------------------+-------------+-------------+-----------------------+
//	| magic "sluiceJ\0"  | version u32 | flags u32   | CRC-32C of bytes 0-15 |
//	| 8 bytes            | = 1         | 1: snapshot |  u32                  |
//	+--------------------+-------------+-------------+-----------------------+
//	then frames, back to back:
//	+------------+---------------------------------+---------------------------------------+
//	| length u32 | CRC-32C (Castagnoli) u32 over   | payload (length bytes)                |
//	| of payload | the length field and payload    |                                       |
//	+------------+---------------------------------+---------------------------------------+
//	payload:
//	+---------+-----------+----------+---------+----------------------------+
//	| LSN u64 | batch u64 | flags u8 | tag u8  | data (length - 18 bytes)   |
//	+---------+-----------+----------+---------+----------------------------+
//	flags: 1 = end of batch (last frame of a Commit), 2 = snapshot (first frame only).
//
// Batches are numbered from 1, +1 per Commit (a compaction's snapshot takes a batch number
// too); a file without the snapshot header flag starts at LSN 1 in batch 1.
//
// # Invariants (Journal.checkInvariants)
//
//   - next LSN == Durable() + Buffered() + 1; nothing is buffered iff the write buffer is empty;
//   - the file's size is the header plus complete, synced batches; GrownBytes() <= size.
package journal
