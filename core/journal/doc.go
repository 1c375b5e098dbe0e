// Package journal is sluice's write-ahead log: numbered records appended in sync batches to one
// file through the core.FS port, replayed in order when the file is opened. It does not know
// what records mean; callers give each record a type tag and bytes (docs/journal.md).
//
// # Contract
//
//  1. Append buffers a record and assigns it the next LSN (+1 per record, from 1). Data over
//     Config.RecordMax is refused with ErrTooLarge before anything is written.
//  2. Commit writes every buffered record as ONE batch (one write, the end flag on its last
//     frame; over preallocated zeros, rule 16), then one Sync, and only then returns the highest durable LSN. A record is
//     acknowledged when the Commit covering it returns nil; group commit is many Appends and one
//     Commit. Batch N+1 is never written before batch N's Sync returned. Commit is Write (the
//     batch returned in flight), Flight.Sync (only the file: it may run on another goroutine
//     while the owner Appends the next batch) and Synced; Write while a batch flies panics.
//  3. A failed Write or Sync poisons the journal: nothing after the last good batch is
//     acknowledged, Sync is never retried, and every later call returns an error wrapping
//     ErrPoisoned and the first failure, until the journal is reopened (the disk is the truth).
//     On the failure the journal truncates the file back to its last complete batch and syncs
//     that truncation (a new change, not a retry of the failed fsync), so that the failed
//     batch's undecided bytes cannot be replayed by a reopen and then vanish in a later crash.
//     If that cut fails too, the poison also wraps ErrUndecided: reopen only after a restart.
//  4. Open decides before it writes. It reads the file once, in bounded chunks (readChunk,
//     plus the largest frame), classifying every frame, and hands the caller's function the
//     records of each complete batch, in LSN order, as soon as the batch's end frame is
//     valid (from the buffer that holds them, up to holdChunks chunks, or read again if the
//     batch is longer); after a compaction the first record is the snapshot (Record.Snapshot). Only
//     whole records of whole batches are ever replayed, never one of a batch whose end frame
//     is not validated. Damage after a batch may still refuse the file: a refused Open has
//     replayed the complete batches before the damage (none for a bad header), and the caller
//     discards what replay built whenever Open fails. Only once the whole file is classified
//     does it act: cut a torn tail, remove a leftover .compact, clear the clean-close mark.
//     Memory at open is the caller's state plus a few chunks, not the file.
//  5. Compact (nothing buffered) writes a header and one snapshot frame (LSN = Durable()) to
//     <name>.compact, syncs and closes it, renames it over the journal, syncs the directory
//     and continues appending to the new file. Kept: a failure before the rename returns an
//     error and the old journal stays in use. Lost: a failure after it poisons the journal;
//     so does a Rename error with <name>.compact gone (a port such as osfs may fail after
//     renaming), since the old file may be unlinked. A crash anywhere leaves one of the two
//     files, and both replay to the same state.
//  6. Without a clean-close mark (a crash), a short or bad frame, or a last batch without its
//     end flag, with no valid frame of a later batch anywhere after it, is a torn tail: Open
//     cuts it at the end of the last complete batch, syncs and logs at Warn (offset, bytes
//     dropped). Valid frames of the SAME batch after a bad one are an out-of-order torn write,
//     cut too.
//  7. A bad frame followed by a valid frame of a later batch is corruption of synced data
//     (rule 2 proves the bad frame had been synced). So is any CRC-valid frame that does not
//     follow on (LSN gap, batch number out of order, unknown flags, a misplaced snapshot), and
//     a damaged snapshot frame (it was synced before the rename made its file visible).
//  8. After a crash, a bit flip in the last batch cannot be told from a torn write: it is cut
//     as torn. After a clean close it is refused (rule 12).
//  9. A non-empty file with a bad header, or a header of another format version, is refused
//     (ErrBadHeader); an empty file is no journal. An older file is never misread.
//  10. A new journal is created atomically like a compaction (header to <name>.compact, sync,
//     rename, directory sync), so a crash never leaves a journal with a partial header.
//  11. Open syncs the directory before it appends to an existing journal: a SyncDir that
//     failed in an earlier create or compaction left the entry undecided, and appending to a
//     file whose name may roll back would lose acknowledged records.
//  12. Close writes the clean-close mark (the file's length and last LSN, with its own CRC)
//     into the header and syncs it; a poisoned journal closes without it. If Open's sync of
//     the cleared mark fails, Open fails with ErrUndecided: restart before reopening. Open of a marked
//     file requires exactly that length and last LSN with every frame valid, and refuses
//     otherwise (a flipped bit anywhere, a file cut short or grown). It clears the mark with
//     a write and a sync before it appends anything. A mark whose CRC fails was torn by a
//     crash while Close wrote it or Open cleared it: it counts as none.
//  13. Every refusal of a journal's bytes is a *FormatError wrapping ErrCorrupt, naming the
//     file and one place: the offset, the LSN of the valid frame that ends there and of the
//     frame at it (for a bad frame, of the later frame that proves it corrupt, whose offset
//     the reason gives), and ending with what the user can do; a record the replay function
//     refuses (the runner cannot decode it) is one too, wrapping that error as well. After
//     such a record nothing more is replayed, but the file is still classified to its end:
//     if its frames are refused too, Open reports that refusal. A refusal writes nothing:
//     every file is left byte for byte as it was.
//  14. Read is Open for inspection: the same classification and replay, and no write at all
//     (no create, cut, mark clearing, directory sync or .compact removal); it reports a torn
//     tail instead of cutting it. On a refusal it has replayed the complete batches before
//     the damage, and a record the function refused among them is what it reports (the first
//     damage it met).
//  15. Config.JournalMax bounds the file: an Append that would grow it beyond is refused with
//     ErrFull. Only failing compactions let a journal grow that far.
//  16. Preallocation: a Write that finds no room extends the file with zeros, PreallocBytes
//     past its batch (never past JournalMax), and every batch is written over zeros with
//     WriteAt, so its fsync changes no file size (fdatasync then skips the metadata commit).
//     Zeros from the end of a complete batch to the end of the file end the journal cleanly
//     (Tail.Spare): Open keeps them, cuts and logs nothing. Any other byte there is a torn
//     tail, cut with the spare (rule 6). A batch is never written over another batch's bytes.
//     Close cuts the spare before it writes the mark; zeros past a mark's length (that cut
//     lost in a crash) are allowed, nothing else is. A failed batch cuts the spare with it
//     (rule 3). PreallocBytes < 0: off, every batch appended.
//  17. A <name>.compact without a journal beside it (or beside an empty one) is only ever the
//     leftover of a create cut short: a header at most, torn within a sector. Anything
//     more may hold jobs (a journal an operator moved): Open and Read refuse it with
//     ErrLoneCompact, naming both files and what the .compact holds, and change nothing.
//
// Scan exposes the classification over a byte slice, replaying only once it is done; it never
// panics (FuzzScan), and Open's single pass in chunks classifies exactly as Scan and replays
// what Scan does (refused: the complete batches before the damage) (checkChunked).
//
// # Recovery table (recoveryTable in recover.go is the same table as code)
//
// Open first reads, classifies and replays, in one pass (rule 4); the rows below then run in
// order: a leftover .compact's row, then the journal's own.
//
//	what Open finds                                  what it does
//	-----------------------------------------------  ------------------------------------------
//	a leftover <name>.compact beside the journal,    the rename did not happen: remove it, sync
//	or alone holding no record in at most 512 bytes  the directory, then the journal's row
//	(a create cut short)
//	a <name>.compact that may hold records, and no   refuse, changing nothing: ErrLoneCompact
//	journal (or an empty one) beside it              (and ErrCorrupt), saying what the .compact
//	                                                 holds and what to do
//	no journal, or an empty file                     create it (rule 10)
//	a valid header, complete batches to the end      replay; keep the zeros; clear the mark
//	or to zeros running to the end (with a clean-    (write, sync) if there is one; sync the
//	close mark: exactly its length and last LSN,     directory (rule 11)
//	then only zeros)
//	no clean-close mark; a short or bad frame, or    replay the complete batches; truncate to
//	a last batch without its end flag, with no       the end of the last one, clear a torn mark,
//	valid frame of a later batch after it (torn,     sync, log at Warn with the offset and the
//	maybe out of order)                              bytes dropped, sync the directory
//	a bad frame followed by a valid frame of a       refuse, changing nothing: a *FormatError
//	later batch; valid frames that do not follow     (ErrCorrupt) naming the file, the offset
//	on; a clean-close mark the file does not         and the LSNs around it, ending with what
//	match; a record the replay refuses               to do
//	a bad header (or another format version) in a    refuse, changing nothing
//	non-empty file
//	jobs running at the crash                        (the runner's row: it sees them in replay)
//
// # Byte layout (format version 2, little-endian)
//
//	header (40 bytes)
//	+--------------------+-------------+-------------+-----------------------+
//	| magic "sluiceJ\0"  | version u32 | flags u32   | CRC-32C of bytes 0-15 |
//	| 8 bytes            | = 2         | 1: snapshot |  u32                  |
//	+--------------------+-------------+-------------+-----------------------+
//	| clean-close mark (bytes 20-39): all zero while open or after a crash   |
//	| length u64 | last LSN u64 | CRC-32C of the mark's bytes 20-35 u32      |
//	+------------------------------------------------------------------------+
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
//	after the last complete batch: zeros to the end of the file (preallocated, rule 16)
//
// The version is checked before anything that depends on the layout: version 1 (a 20-byte
// header without the mark) is refused as another format version. The mark and the zeros are
// the only bytes of a file ever overwritten (core.File.WriteAt).
//
// Batches are numbered from 1, +1 per Commit (a compaction's snapshot takes a batch number
// too); a file without the snapshot header flag starts at LSN 1 in batch 1.
//
// # Invariants (Journal.checkInvariants)
//
//   - next LSN == Durable() + Buffered() + 1; nothing is buffered iff the write buffer is empty;
//   - Size() is the header plus complete, synced batches; GrownBytes() <= Size() minus the
//     header (it is the batches after the last snapshot, as the file holds them); the file is
//     at least Size() plus the batch in flight (the rest: zeros).
package journal
