// Package forge builds journal images that a buggy writer, a wrong copy or a bad restore would
// leave: synced bytes rewritten so that every checksum still matches. The journal's CRCs cannot
// see such damage; its frame rules (LSN and batch order, flags), the runner's record decoding
// or its replay rules must, and the simulator checks that open and replay refuse each forgery
// as corruption (or, for a first record in an older format, as runner.ErrFormat).
//
// A forger edits an image in place (or returns a new one when a field is left out and the
// frame's length changes), reseals the CRCs it broke, and returns a short text saying what it
// did, or "" when nothing in the image fits. It draws only from the *rand.Rand it is given, so
// the simulator decides which stream pays for each forgery.
//
// The package knows the journal's frame layout (length u32 | crc u32 | lsn u64 | batch u64 |
// flags u8 | tag u8 | data, CRC-32C over the length and everything after the crc), its file
// header and clean-close mark, and the runner's codec only as far as its leading fields
// (version u8, id u64, then an attempt u32, an enqueue's due u64 and target length u32, a
// finish's kind u8 and retryable bool; a snapshot's version u8, next id u64, term seq u64, job
// count u32, then jobs starting id u64, state u8), the fixed sizes of its short records, and
// the schedule records' layout (core/runner/schedule_record.go).
//
// Forgers:
//
//   - Synced: one field of one frame (its LSN, batch, flags or tag, a codec version, a record
//     field the codec or replay refuses, a snapshot's job count or state), or the file header.
//   - Schedule: one field of a schedule record or of a snapshot's schedules that the codec or
//     replay refuses; ScheduleResized: a schedule record with a field left out.
//   - Mark: the clean-close mark made to disagree with the file.
package forge
