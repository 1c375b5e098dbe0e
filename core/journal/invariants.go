package journal

import "fmt"

// checkInvariants states the invariants written on Journal's fields.
func (j *Journal) checkInvariants() error {
	switch {
	case (len(j.buf) == 0) != (j.buffered == 0):
		return fmt.Errorf("journal: %d bytes buffered for %d records", len(j.buf), j.buffered)
	case j.next != j.durable+LSN(j.buffered)+1:
		return fmt.Errorf("journal: next LSN %d, durable %d, buffered %d", j.next, j.durable, j.buffered)
	case j.batch < 1:
		return fmt.Errorf("journal: next batch %d", j.batch)
	case j.size < headerLen:
		return fmt.Errorf("journal: size %d below the header's %d", j.size, headerLen)
	case j.grown < 0 || j.grown > j.size:
		return fmt.Errorf("journal: grown %d outside [0, size %d]", j.grown, j.size)
	case j.closed && j.buffered != 0:
		return fmt.Errorf("journal: closed with %d records buffered", j.buffered)
	}
	return nil
}
