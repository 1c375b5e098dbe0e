package journal

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/sim/disk"
	"pgregory.net/rapid"
)

// journalModel is the plain model: the records acknowledged so far, in LSN order, and the
// ones buffered. A reopen, with or without a crash, must replay exactly the acknowledged ones:
// buffered records never reach the file, and a failed batch is cut back before anyone can
// reopen (the faults here are one-shot, so the cut itself succeeds).
type journalModel struct {
	d        *disk.Disk
	j        *Journal
	acked    []string
	buffered []string
	poisoned bool
}

const modelRecordMax = 64

func (m *journalModel) open(t *rapid.T) {
	var got []string
	j, err := Open(m.d, "j", Config{RecordMax: modelRecordMax}, func(r Record) error {
		if r.Snapshot {
			got = nil
			if len(r.Data) > 0 {
				got = strings.Split(string(r.Data), ",")
			}
			return nil
		}
		got = append(got, string(r.Data))
		return nil
	})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if diff := cmp.Diff(m.acked, got); diff != "" {
		t.Fatalf("replay differs from the acknowledged records (-want +got):\n%s", diff)
	}
	m.j, m.buffered, m.poisoned = j, nil, false
}

func (m *journalModel) wantPoisoned(t *rapid.T, what string, err error) {
	if !errors.Is(err, ErrPoisoned) || !errors.Is(err, disk.ErrInjected) {
		t.Fatalf("%s on a poisoned journal: %v, want ErrPoisoned wrapping the first failure", what, err)
	}
}

func (m *journalModel) Append(t *rapid.T) {
	n := rapid.IntRange(1, modelRecordMax+8).Draw(t, "size") // not 0: the test snapshot joins with ","
	data := strings.Repeat(string(rune('a'+len(m.acked)%26)), n)
	lsn, err := m.j.Append(1, []byte(data))
	switch {
	case m.poisoned:
		m.wantPoisoned(t, "Append", err)
	case n > modelRecordMax:
		if !errors.Is(err, ErrTooLarge) {
			t.Fatalf("Append of %d bytes: %v, want ErrTooLarge", n, err)
		}
	case err != nil:
		t.Fatalf("Append: %v", err)
	case lsn != LSN(len(m.acked)+len(m.buffered)+1):
		t.Fatalf("Append got LSN %d, want %d", lsn, len(m.acked)+len(m.buffered)+1)
	default:
		m.buffered = append(m.buffered, data)
	}
}

func (m *journalModel) Commit(t *rapid.T) {
	fault := rapid.SampledFrom([]disk.Op{0, 0, 0, disk.OpWrite, disk.OpSync}).Draw(t, "fault")
	if fault != 0 {
		m.d.FailNext(fault, nil)
	}
	lsn, err := m.j.Commit()
	switch {
	case m.poisoned:
		m.wantPoisoned(t, "Commit", err)
	case len(m.buffered) == 0:
		if err != nil || lsn != LSN(len(m.acked)) {
			t.Fatalf("empty Commit = %d, %v", lsn, err)
		}
	case fault != 0:
		m.wantPoisoned(t, "Commit with a "+fault.String()+" fault", err)
		m.poisoned = true
	case err != nil:
		t.Fatalf("Commit: %v", err)
	default:
		m.acked = append(m.acked, m.buffered...)
		m.buffered = nil
		if lsn != LSN(len(m.acked)) {
			t.Fatalf("Commit = %d, want %d", lsn, len(m.acked))
		}
	}
	if fault != 0 && (m.poisoned || len(m.buffered) == 0) {
		m.d = drainFault(m.d, fault) // the fault did not fire: do not let it leak into later steps
	}
}

func (m *journalModel) Compact(t *rapid.T) {
	if len(m.buffered) != 0 {
		t.Skip("Compact needs an empty buffer")
	}
	fault := rapid.SampledFrom([]disk.Op{0, 0, disk.OpCreate, disk.OpWrite, disk.OpSync, disk.OpRename,
		disk.OpSyncDir}).Draw(t, "fault")
	if fault != 0 {
		m.d.FailNext(fault, nil)
	}
	err := m.j.Compact(9, []byte(strings.Join(m.acked, ",")))
	switch {
	case m.poisoned:
		m.wantPoisoned(t, "Compact", err)
		m.d = drainFault(m.d, fault)
	case fault == disk.OpSyncDir:
		m.wantPoisoned(t, "Compact failing after the rename", err)
		m.poisoned = true
	case fault != 0:
		if !errors.Is(err, disk.ErrInjected) || errors.Is(err, ErrPoisoned) {
			t.Fatalf("Compact failing before the rename: %v, want a kept outcome", err)
		}
	case err != nil:
		t.Fatalf("Compact: %v", err)
	}
}

func (m *journalModel) Reopen(t *rapid.T) {
	m.j.Close()
	m.open(t)
}

func (m *journalModel) Crash(t *rapid.T) {
	m.d.Crash()
	m.open(t)
}

func (m *journalModel) Check(t *rapid.T) {
	if err := m.j.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if m.j.Durable() != LSN(len(m.acked)) || (!m.poisoned && m.j.Buffered() != len(m.buffered)) {
		t.Fatalf("Durable %d Buffered %d; model %d acked, %d buffered",
			m.j.Durable(), m.j.Buffered(), len(m.acked), len(m.buffered))
	}
}

// drainFault clears a queued one-shot fault that did not fire, by performing harmless ops of
// that kind on a scratch file, so that it cannot hit a later, unrelated step.
func drainFault(d *disk.Disk, op disk.Op) *disk.Disk {
	if op == 0 {
		return d
	}
	f, err := d.Create("scratch")
	for i := 0; err != nil && i < 3; i++ { // a queued create fault fires here
		f, err = d.Create("scratch")
	}
	switch op {
	case disk.OpWrite:
		f.Write([]byte{1})
	case disk.OpSync:
		f.Sync()
	case disk.OpRename:
		d.Rename("scratch", "scratch2")
		d.Rename("scratch2", "scratch")
	case disk.OpSyncDir:
		d.SyncDir()
	}
	f.Close()
	d.Remove("scratch")
	d.SyncDir()
	return d
}

func TestReplayEqualsAcknowledgedRecordsUnderFaultsAndCrashes(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &journalModel{d: disk.New(rapid.Int64().Draw(t, "disk seed"))}
		m.open(t)
		t.Repeat(rapid.StateMachineActions(m))
	})
}
