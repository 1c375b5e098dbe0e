package journal

import "fmt"

// checkInvariants states the invariants written on Journal's fields: buffered bytes exactly
// when records are buffered, the next LSN right after them, a batch number from 1, a size at
// least the header's and at least what it grew by, nothing buffered once closed.
func (j *Journal) checkInvariants() error {
	flying := LSN(0)
	if !j.flying.Empty() {
		flying = j.flying.through - j.durable
	}
	if (len(j.buf) == 0) != (j.buffered == 0) || j.next != j.durable+flying+LSN(j.buffered)+1 || j.batch < 1 ||
		j.size < headerLen || j.grown < 0 || j.grown > j.size-headerLen || j.closed && j.buffered != 0 ||
		!j.closed && j.poison == nil && j.alloc < j.size+j.flying.bytes {
		return fmt.Errorf("journal: %d bytes buffered for %d records, next LSN %d, durable %d, %d in flight, next batch %d, size %d (header %d), file %d, grown %d, closed %v",
			len(j.buf), j.buffered, j.next, j.durable, flying, j.batch, j.size, headerLen, j.alloc, j.grown, j.closed)
	}
	return nil
}

// CheckInvariants is checkInvariants for other packages' checkers (the runner engine's).
func (j *Journal) CheckInvariants() error { return j.checkInvariants() }
