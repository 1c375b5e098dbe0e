package disk

import (
	"math/rand"
	"strconv"
	"testing"

	"github.com/sluicehq/sluice/sim/faults"
)

// slowSynced is what AdoptSynced stands for.
func slowSynced(t *testing.T, d *Disk, name string, data []byte) {
	t.Helper()
	f := mustCreate(t, d, name)
	mustWrite(t, f, data)
	mustSync(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	mustSyncDir(t, d)
}

// AdoptSynced leaves the disk as the calls do, over random histories: unsynced and synced
// writes, WriteAt, truncates, renames and removes, files with pending changes replaced, and
// a crash afterwards draws the same fates.
func TestAdoptSyncedEqualsCalls(t *testing.T) {
	for seed := int64(0); seed < 300; seed++ {
		r := rand.New(rand.NewSource(seed))
		slow, fast := New(seed), New(seed)
		for _, d := range []*Disk{slow, fast} {
			hist(t, d, rand.New(rand.NewSource(seed)))
		}
		for k := 0; k < 1+r.Intn(4); k++ {
			name := "f" + strconv.Itoa(r.Intn(4))
			data := make([]byte, r.Intn(3000))
			r.Read(data)
			slowSynced(t, slow, name, append([]byte(nil), data...))
			if !fast.AdoptSynced(name, data) {
				t.Fatalf("seed %d: a faultless disk refused", seed)
			}
		}
		same(t, seed, slow, fast)
		// An unsynced overwrite after: base and what reads see must not share bytes.
		if names, _ := slow.List(); len(names) > 0 && r.Intn(2) == 0 {
			name, off := names[r.Intn(len(names))], r.Int63n(8)
			for _, d := range []*Disk{slow, fast} {
				f, err := d.Open(name)
				if err != nil {
					t.Fatal(err)
				}
				if n, _ := f.Size(); n > off+2 {
					if _, err := f.(*file).WriteAt([]byte("zz"), off); err != nil {
						t.Fatal(err)
					}
				}
			}
			same(t, seed, slow, fast)
		}
		slow.Crash()
		fast.Crash()
		same(t, seed, slow, fast)
	}
}

// hist gives d a random history, ending with files in every state.
func hist(t *testing.T, d *Disk, r *rand.Rand) {
	files := map[string]bool{}
	for i := 0; i < 2+r.Intn(12); i++ {
		name := "f" + strconv.Itoa(r.Intn(4))
		switch r.Intn(7) {
		case 0, 1:
			f := mustCreate(t, d, name)
			files[name] = true
			p := make([]byte, r.Intn(700))
			r.Read(p)
			mustWrite(t, f, p)
			if r.Intn(2) == 0 {
				mustSync(t, f)
			}
			if r.Intn(3) == 0 && len(p) > 4 {
				if _, err := f.(*file).WriteAt([]byte("ab"), int64(r.Intn(len(p)-2))); err != nil {
					t.Fatal(err)
				}
			}
			if r.Intn(3) == 0 {
				if err := f.Truncate(int64(r.Intn(900))); err != nil {
					t.Fatal(err)
				}
			}
		case 2:
			mustSyncDir(t, d)
		case 3:
			if files[name] {
				_ = d.Rename(name, "f"+strconv.Itoa(r.Intn(4)))
			}
		case 4:
			_ = d.Remove(name)
		default:
		}
	}
}

func same(t *testing.T, seed int64, slow, fast *Disk) {
	t.Helper()
	if a, b := slow.Dump(), fast.Dump(); a != b {
		t.Fatalf("seed %d: dumps differ:\n%s\n%s", seed, a, b)
	}
	if a, b := slow.LastCrash(), fast.LastCrash(); a != b {
		t.Fatalf("seed %d: crashes differ:\n%s\n%s", seed, a, b)
	}
	for _, d := range []*Disk{slow, fast} {
		if err := d.CheckInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
	names, _ := slow.List()
	for _, name := range names {
		a, b := slow.live[name], fast.live[name]
		if string(a.data) != string(b.data) || string(a.base) != string(b.base) || len(a.pending) != len(b.pending) {
			t.Fatalf("seed %d: %s differs", seed, name)
		}
	}
}

// A disk whose calls could fail or draw is left to them.
func TestAdoptSyncedRefuses(t *testing.T) {
	d := New(1)
	d.SetFaults(faults.Disk{WriteErr: 0.1})
	if d.AdoptSynced("f", []byte("x")) {
		t.Fatal("adopted with faults set")
	}
	d = New(1)
	d.FailNext(OpSync, nil)
	if d.AdoptSynced("f", []byte("x")) {
		t.Fatal("adopted with a failure queued")
	}
	d = New(1)
	d.CrashAfter(3)
	if d.AdoptSynced("f", []byte("x")) {
		t.Fatal("adopted with a crash point armed")
	}
}
