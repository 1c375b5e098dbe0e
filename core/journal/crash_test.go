package journal

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
)

// The crash-point enumeration (pebble's pattern): for random scripts of batches, compactions
// and reopens, count the disk's mutating operations, then for every k crash after the k-th,
// recover, and check the journal's promises against a model of what was acknowledged.

const (
	stepBatch = iota
	stepCompact
	stepReopen
)

type step struct {
	kind    int
	records int
}

type script struct {
	seed  int64
	steps []step
}

func (s script) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d:", s.seed)
	for _, st := range s.steps {
		switch st.kind {
		case stepBatch:
			fmt.Fprintf(&b, " batch(%d)", st.records)
		case stepCompact:
			b.WriteString(" compact")
		case stepReopen:
			b.WriteString(" reopen")
		}
	}
	return b.String()
}

// cfg is the journal configuration a script runs with: one seed in three appends every
// batch, the others preallocate a little (64 to 575 bytes), so that batches both overwrite
// spare zeros and extend the file, and crashes land among both.
func (s script) cfg() Config {
	if s.seed%3 == 0 {
		return Config{PreallocBytes: -1}
	}
	return Config{PreallocBytes: 64 + s.seed%512}
}

func genScript(seed int64) script {
	rng := rand.New(rand.NewSource(seed))
	s := script{seed: seed}
	for range 3 + rng.Intn(8) {
		switch p := rng.Intn(100); {
		case p < 72:
			s.steps = append(s.steps, step{kind: stepBatch, records: 1 + rng.Intn(6)})
		case p < 88:
			s.steps = append(s.steps, step{kind: stepCompact})
		default:
			s.steps = append(s.steps, step{kind: stepReopen})
		}
	}
	return s
}

// payload is record lsn's data: a function of the seed and the LSN only, so that a replay
// can be checked without the script. Some records span several 512-byte sectors.
func payload(seed int64, lsn LSN) []byte {
	h := uint64(lsn)*0x9E3779B97F4A7C15 + uint64(seed)*0xBF58476D1CE4E5B9
	h ^= h >> 29
	size := int(h % 90)
	if h%7 == 0 {
		size = 500 + int(h%1100)
	}
	b := fmt.Appendf(nil, "%d/%d:", seed, lsn)
	for i := range size {
		b = append(b, byte('a'+(uint64(i)+h)%26))
	}
	return b
}

// snapshotOf is the snapshot standing for records 1..lsn.
func snapshotOf(seed int64, lsn LSN) []byte { return fmt.Appendf(nil, "snapshot %d/%d", seed, lsn) }

// model is what the script's run promised.
type model struct {
	acked LSN // highest LSN a Commit acknowledged
	// bounds are the LSNs that end a batch some Commit started to write (0 included): a
	// recovered journal must end at one of them.
	bounds []LSN
	// compacting: the run stopped inside Compact; compactFrom is the disk's op count when
	// that Compact began (the crash's op minus it is its position in the swap).
	compacting  bool
	compactFrom int
	err         error // the error that stopped the run
}

// crashFS is a file system that counts its mutating operations and can crash: sim/disk, or
// internal/faultfs over the real disk.
type crashFS interface {
	core.FS
	Ops() int
}

// runScript runs s until its first error. Any journal error stops it: under CrashAfter every
// mutating operation fails from the crash point on.
func runScript(d crashFS, s script) *model {
	m := &model{bounds: []LSN{0}}
	j, err := Open(d, "j", s.cfg(), nil)
	if err != nil {
		m.err = err
		return m
	}
	for _, st := range s.steps {
		switch st.kind {
		case stepBatch:
			for range st.records {
				lsn := j.Durable() + LSN(j.Buffered()) + 1
				if _, err := j.Append(1, payload(s.seed, lsn)); err != nil {
					m.err = err
					return m
				}
			}
			m.bounds = append(m.bounds, j.Durable()+LSN(j.Buffered()))
			lsn, err := j.Commit()
			if err != nil {
				m.err = err
				return m
			}
			m.acked = lsn
		case stepCompact:
			m.compactFrom = d.Ops()
			if err := j.Compact(9, snapshotOf(s.seed, j.Durable())); err != nil {
				m.err, m.compacting = err, true
				return m
			}
		case stepReopen:
			// Close writes the clean-close mark, and Open clears it: both are crash points.
			if err := j.Close(); err != nil {
				m.err = err
				return m
			}
			if j, err = Open(d, "j", s.cfg(), nil); err != nil {
				m.err = err
				return m
			}
		}
		if err := j.checkInvariants(); err != nil {
			panic(err)
		}
	}
	m.err = j.Close()
	return m
}

// recovered replays the journal after a crash and checks every record: LSNs contiguous from 1
// (or from a snapshot), each record whole and exactly what was appended under its LSN.
type recovered struct {
	last     LSN
	snapshot bool // the first record was a snapshot
	n        int
	cut      bool // Open cut a torn tail
	closed   bool // the file carried a clean-close mark it matched
	spare    bool // the file ended in preallocated zeros
}

func (r *recovered) replay(seed int64) func(Record) error {
	return func(rec Record) error {
		switch {
		case rec.Snapshot:
			if r.n != 0 || string(rec.Data) != string(snapshotOf(seed, rec.LSN)) {
				return fmt.Errorf("snapshot LSN %d as record %d with data %q", rec.LSN, r.n, rec.Data)
			}
			r.snapshot = true
		case rec.LSN != r.last+1:
			return fmt.Errorf("LSN %d follows LSN %d", rec.LSN, r.last)
		case rec.Tag != 1 || string(rec.Data) != string(payload(seed, rec.LSN)):
			return fmt.Errorf("LSN %d: tag %d, data %q is not what was appended", rec.LSN, rec.Tag, rec.Data)
		}
		r.last = rec.LSN
		r.n++
		return nil
	}
}

// checkRecovery reopens d after a crash and checks the model's promises.
func checkRecovery(d crashFS, s script, m *model) (recovered, error) {
	// Inspection first: it must write nothing and replay what Open then replays.
	var inspected recovered
	ops := d.Ops()
	tail, err := Read(d, "j", Config{}, inspected.replay(s.seed))
	if err != nil {
		return inspected, fmt.Errorf("read-only inspection after the crash: %w", err)
	}
	if d.Ops() != ops {
		return inspected, fmt.Errorf("read-only inspection made %d mutating disk operations", d.Ops()-ops)
	}
	var r recovered
	log, logs := logBuffer()
	cfg := s.cfg()
	cfg.Logger = log
	j, err := Open(d, "j", cfg, r.replay(s.seed))
	if err != nil {
		return r, fmt.Errorf("reopen after the crash: %w", err)
	}
	r.cut = strings.Contains(logs.String(), "cut a torn tail")
	defer j.Close()
	if inspected.cut = tail.Kind == TailTorn; inspected != r {
		return r, fmt.Errorf("inspection replayed %+v (tail %v), Open %+v", inspected, tail.Kind, r)
	}
	r.closed, r.spare = tail.Closed, tail.Spare > 0
	switch {
	case r.last < m.acked:
		return r, fmt.Errorf("acknowledged LSN %d lost: recovered up to %d", m.acked, r.last)
	case !slices.Contains(m.bounds, r.last):
		return r, fmt.Errorf("recovered up to LSN %d, not the end of a written batch %v", r.last, m.bounds)
	case m.compacting && r.last != m.acked:
		return r, fmt.Errorf("crash inside compaction: recovered %d, want exactly %d", r.last, m.acked)
	case j.Durable() != r.last:
		return r, fmt.Errorf("Durable %d after replaying up to %d", j.Durable(), r.last)
	}
	names, err := d.List()
	if err != nil || !slices.Equal(names, []string{"j"}) {
		return r, fmt.Errorf("directory after recovery: %v, %v", names, err)
	}
	f, err := d.Open("j")
	if err != nil {
		return r, err
	}
	size, _ := f.Size()
	b := make([]byte, size)
	f.ReadAt(b, 0)
	f.Close()
	if t, err := Scan(b, nil); err != nil || t.Kind != TailClean {
		return r, fmt.Errorf("the file is not clean after recovery (torn tail not cut?): %+v %v", t, err)
	}
	// The recovered journal takes new batches and replays them.
	lsn := j.Durable() + 1
	j.Append(1, payload(s.seed, lsn))
	if got, err := j.Commit(); err != nil || got != lsn {
		return r, fmt.Errorf("commit after recovery = %d, %v", got, err)
	}
	j.Close()
	var again recovered
	if _, err := Open(d, "j", s.cfg(), again.replay(s.seed)); err != nil || again.last != lsn {
		return r, fmt.Errorf("second reopen: up to %d, %v", again.last, err)
	}
	return r, nil
}

func scriptCount() int {
	if os.Getenv("SLUICE_LONG") != "" {
		return 5000
	}
	return 500
}

func TestCrashPointsLoseNothingAcknowledged(t *testing.T) {
	var points, insideCompaction, oldFile, newFile, cuts, closed, spares int
	// swapAt counts crashes by their op in the compaction swap: 1 create .compact, 2 write,
	// 3 sync, 4 rename (the crash comes before it), 5 directory sync (after the rename,
	// before the directory is synced).
	var swapAt [6]int
	for seed := range int64(scriptCount()) {
		s := genScript(seed)
		full := disk.New(seed)
		if m := runScript(full, s); m.err != nil {
			t.Fatalf("%v: run without a crash: %v", s, m.err)
		}
		total := full.Ops()
		for k := 1; k <= total; k++ {
			d := disk.New(seed*1_000_003 + int64(k))
			if seed%2 == 1 {
				// Unsynced directory changes may survive as an in-order prefix (journaling fs).
				d.SetFaults(faults.Disk{DirPersist: 0.5})
			}
			d.CrashAfter(k)
			m := runScript(d, s)
			if m.err == nil {
				t.Fatalf("%v: crash after op %d of %d: the run did not fail", s, k, total)
			}
			if !errors.Is(m.err, disk.ErrCrashed) {
				t.Fatalf("%v: crash after op %d: the run failed otherwise: %v", s, k, m.err)
			}
			d.Crash()
			r, err := checkRecovery(d, s, m)
			if err != nil {
				t.Fatalf("%v: crash after op %d of %d (disk seed %d): %v\ncrash: %s",
					s, k, total, seed*1_000_003+int64(k), err, d.LastCrash())
			}
			points++
			if r.cut {
				cuts++
			}
			if r.spare {
				spares++
			}
			if r.closed {
				closed++
			}
			if m.compacting {
				insideCompaction++
				if pos := k - m.compactFrom; pos >= 1 && pos < len(swapAt) {
					swapAt[pos]++
				} else {
					t.Fatalf("%v: crash at op %d is op %d of a compaction, which has 5", s, k, pos)
				}
				if r.snapshot && r.n >= 1 {
					newFile++
				} else {
					oldFile++
				}
			}
		}
	}
	t.Logf("%d crash points, %d torn tails cut, %d found a clean-close mark, %d inside compaction (%d recovered the old file, %d the new one)",
		points, cuts, closed, insideCompaction, oldFile, newFile)
	if cuts == 0 {
		t.Error("no crash left a torn tail to cut")
	}
	if closed == 0 {
		t.Error("no crash left a clean-close mark to check")
	}
	t.Logf("%d recoveries found preallocated zeros after the last batch", spares)
	if spares == 0 {
		t.Error("no crash left preallocated space to keep")
	}
	t.Logf("crashes by compaction op (create, write, sync, rename, dir sync): %v", swapAt[1:])
	for pos := 1; pos < len(swapAt); pos++ {
		if swapAt[pos] == 0 {
			t.Errorf("no crash at op %d of the compaction swap", pos)
		}
	}
	if oldFile == 0 || newFile == 0 {
		t.Errorf("crashes inside compaction never recovered the old (%d) or the new (%d) file", oldFile, newFile)
	}
}

// TestFaultsPoisonThenRecover: random write, sync and directory faults while running scripts;
// every error poisons or is reported, a reopen (retried while faults hit it) recovers
// everything acknowledged, and so does a crash at the end.
func TestFaultsPoisonThenRecover(t *testing.T) {
	var poisoned int
	for seed := range int64(scriptCount()) {
		s := genScript(seed)
		d := disk.New(seed)
		d.SetFaults(faults.Disk{WriteErr: 0.08, SyncErr: 0.08, RenameErr: 0.1, SyncDirErr: 0.05,
			CreateErr: 0.05, TruncateErr: 0.05})
		m := &model{bounds: []LSN{0}}
		var j *Journal
		reopen := func() error {
			if j != nil {
				j.Close()
			}
			var err error
			for range 20 {
				var r recovered
				if j, err = Open(d, "j", s.cfg(), r.replay(s.seed)); err == nil {
					if r.last < m.acked || !slices.Contains(m.bounds, r.last) {
						return fmt.Errorf("reopen recovered up to %d; acked %d, bounds %v", r.last, m.acked, m.bounds)
					}
					return nil
				}
				if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrBadHeader) {
					return err
				}
				if errors.Is(err, ErrUndecided) {
					d.Crash() // the restart the error asks for
				}
			}
			return fmt.Errorf("Open kept failing: %w", err)
		}
		if err := reopen(); err != nil {
			t.Fatalf("%v: %v", s, err)
		}
		for _, st := range s.steps {
			var err error
			switch st.kind {
			case stepBatch:
				for range st.records {
					j.Append(1, payload(s.seed, j.Durable()+LSN(j.Buffered())+1))
				}
				m.bounds = append(m.bounds, j.Durable()+LSN(j.Buffered()))
				var lsn LSN
				if lsn, err = j.Commit(); err == nil {
					m.acked = lsn
				} else if !errors.Is(err, ErrPoisoned) {
					t.Fatalf("%v: Commit failed without poisoning: %v", s, err)
				}
			case stepCompact:
				err = j.Compact(9, snapshotOf(s.seed, j.Durable()))
			case stepReopen:
				err = errors.New("reopen")
			}
			if err != nil {
				if errors.Is(err, ErrPoisoned) {
					poisoned++
					if _, err := j.Append(1, nil); !errors.Is(err, ErrPoisoned) {
						t.Fatalf("%v: Append on a poisoned journal: %v", s, err)
					}
				}
				if os.Getenv("SLUICE_DEBUG") != "" {
					t.Logf("%v: step %v: %v", s, st, err)
				}
				if errors.Is(err, ErrUndecided) {
					// The journal asks for a restart of the machine before a reopen.
					d.Crash()
				}
				// Whatever failed, the disk is the truth: reopen (this same process).
				if err := reopen(); err != nil {
					t.Fatalf("%v: %v", s, err)
				}
			}
		}
		j.Close()
		d.SetFaults(faults.Disk{})
		d.Crash()
		m.compacting = false
		if _, err := checkRecovery(d, s, m); err != nil {
			t.Fatalf("%v: after the final crash: %v\ncrash: %s", s, err, d.LastCrash())
		}
	}
	if poisoned == 0 {
		t.Error("no run was poisoned: the faults never hit a commit")
	}
	t.Logf("%d poisonings", poisoned)
}
