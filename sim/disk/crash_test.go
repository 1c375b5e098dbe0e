package disk

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/faults"
)

const seedsMax = 400 // seeds per outcome-class test; each run is a few microseconds

func pattern(off, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + (off+i)%26) // never zero, so holes and garbage stand out
	}
	return b
}

func roundUp(n int) int { return (n + SectorSize - 1) / SectorSize * SectorSize }

// durableFile makes name hold synced and dir-synced contents, and returns it open.
func durableFile(t *testing.T, d *Disk, name string, contents []byte) core.File {
	t.Helper()
	f := mustCreate(t, d, name)
	mustWrite(t, f, contents)
	mustSync(t, f)
	mustSyncDir(t, d)
	return f
}

// TestUnsyncedWriteOutcomes: one unsynced write inside one sector is lost, kept, zeroed or torn;
// every class occurs across seeds, synced data always survives, and torn garbage never passes
// the sector's end.
func TestUnsyncedWriteOutcomes(t *testing.T) {
	synced, write := pattern(0, 100), pattern(100, 300) // bytes 100..400 of sector 0
	full := append(append([]byte(nil), synced...), write...)
	seen := map[string]int{}
	for seed := int64(1); seed <= seedsMax; seed++ {
		d := New(seed)
		f := durableFile(t, d, "a", synced)
		mustWrite(t, f, write)
		d.Crash()
		check(t, d)
		img, ok := contents(t, d, "a")
		if !ok {
			t.Fatalf("seed %d: a dir-synced file vanished", seed)
		}
		if !bytes.HasPrefix(img, synced) {
			t.Fatalf("seed %d: synced data lost: got %q", seed, img)
		}
		if len(img) > SectorSize {
			t.Fatalf("seed %d: %d bytes, garbage past the sector end %d", seed, len(img), SectorSize)
		}
		switch {
		case len(img) == len(synced):
			seen["lost"]++
		case bytes.Equal(img, full):
			seen["kept"]++
		case len(img) == len(full) && bytes.Count(img[len(synced):], []byte{0}) == len(write):
			seen["zeroed"]++
		case bytes.HasPrefix(full, img):
			seen["torn, prefix only"]++
		case len(img) > len(full):
			seen["torn, garbage past the write's end"]++
		default:
			seen["torn, garbage inside the write"]++
		}
	}
	for _, class := range []string{"lost", "kept", "zeroed", "torn, prefix only", "torn, garbage past the write's end", "torn, garbage inside the write"} {
		if seen[class] == 0 {
			t.Errorf("outcome %q never occurred in %d seeds: %v", class, seedsMax, seen)
		}
	}
}

// TestOutOfOrderPersistence: a later sector, or a later write, reaches the disk while an
// earlier one does not; the hole reads as zeros.
func TestOutOfOrderPersistence(t *testing.T) {
	synced := pattern(0, 100)
	w1, w2 := pattern(100, 1200), pattern(1300, 100) // w1: 100..1300 (3 sectors), w2: 1300..1400
	full := append(append(append([]byte(nil), synced...), w1...), w2...)
	var laterSector, laterWrite int
	for seed := int64(1); seed <= seedsMax; seed++ {
		d := New(seed)
		f := durableFile(t, d, "a", synced)
		mustWrite(t, f, w1)
		mustWrite(t, f, w2)
		d.Crash()
		img, _ := contents(t, d, "a")
		if !bytes.HasPrefix(img, synced) {
			t.Fatalf("seed %d: synced data lost", seed)
		}
		if len(img) > roundUp(len(full)) {
			t.Fatalf("seed %d: %d bytes, past the last sector %d", seed, len(img), roundUp(len(full)))
		}
		zeros := func(from, to int) bool { return len(img) >= to && bytes.Count(img[from:to], []byte{0}) == to-from }
		same := func(from, to int) bool { return len(img) >= to && bytes.Equal(img[from:to], full[from:to]) }
		if zeros(512, 1024) && same(1024, 1300) {
			laterSector++
		}
		if zeros(100, 1300) && same(1300, 1400) {
			laterWrite++
		}
	}
	if laterSector == 0 {
		t.Errorf("a later sector of one write never persisted without an earlier one (%d seeds)", seedsMax)
	}
	if laterWrite == 0 {
		t.Errorf("a later write never persisted without an earlier one (%d seeds)", seedsMax)
	}
}

// TestTornGarbageStaysInItsSector: whatever the seed, bytes that differ from what was written
// (other than zero holes) lie in the sector where the write was cut, and no file grows past
// the sector holding its last written byte.
func TestTornGarbageStaysInItsSector(t *testing.T) {
	for seed := int64(1); seed <= seedsMax; seed++ {
		d := New(seed)
		f := mustCreate(t, d, "a")
		mustSyncDir(t, d)
		mustWrite(t, f, pattern(0, 700)) // sectors 0 and 1, cut anywhere
		d.Crash()
		img, _ := contents(t, d, "a")
		if len(img) > 1024 {
			t.Fatalf("seed %d: %d bytes, past the sector boundary 1024", seed, len(img))
		}
		report := d.LastCrash()
		var k, g int
		if _, err := fmt.Sscanf(report, "a: write 0+700 torn after %d bytes, %d garbage", &k, &g); err != nil {
			continue // not torn
		}
		if limit := (k/SectorSize + 1) * SectorSize; k+g > limit {
			t.Fatalf("seed %d: cut at %d, %d garbage bytes pass the boundary %d", seed, k, g, limit)
		}
		if !bytes.Equal(img[:k], pattern(0, k)) {
			t.Fatalf("seed %d: torn after %d bytes, but the prefix differs", seed, k)
		}
	}
}

// TestUnsyncedWriteAtStaysInItsRange: an unsynced WriteAt over synced bytes is lost, kept,
// torn, zeroed or scattered inside its own range only: the size and every byte outside it
// survive a crash, and a synced WriteAt survives whole.
func TestUnsyncedWriteAtStaysInItsRange(t *testing.T) {
	const from, n = 500, 40 // spans the sector boundary at 512, so it may scatter
	base := pattern(0, 1000)
	fates := map[string]bool{}
	for seed := int64(1); seed <= seedsMax; seed++ {
		d := New(seed)
		f := durableFile(t, d, "a", base)
		if _, err := f.WriteAt(bytes.Repeat([]byte{'Z'}, n), from); err != nil {
			t.Fatal(err)
		}
		d.Crash()
		img, _ := contents(t, d, "a")
		if len(img) != len(base) || !bytes.Equal(img[:from], base[:from]) || !bytes.Equal(img[from+n:], base[from+n:]) {
			t.Fatalf("seed %d: a crash after an unsynced WriteAt changed bytes outside [%d, %d): %s",
				seed, from, from+n, d.LastCrash())
		}
		var k int
		fate := d.LastCrash()
		if _, err := fmt.Sscanf(fate, "a: write 500+40 torn after %d", &k); err == nil {
			fate = "torn"
		}
		fates[fate[:min(len(fate), 24)]] = true
	}
	if len(fates) < 4 {
		t.Errorf("only %d crash fates for an unsynced WriteAt: %v", len(fates), fates)
	}
	d := New(1)
	f := durableFile(t, d, "a", base)
	if _, err := f.WriteAt([]byte("ZZ"), 3); err != nil {
		t.Fatal(err)
	}
	mustSync(t, f)
	d.Crash()
	if img, _ := contents(t, d, "a"); string(img[:6]) != "abcZZf" || len(img) != len(base) {
		t.Fatalf("a synced WriteAt: %q..., %d bytes", img[:6], len(img))
	}
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, ErrCrashed) {
		t.Fatalf("WriteAt on a file opened before the crash: %v", err)
	}
	f = durableFile(t, New(1), "b", base)
	if _, err := f.WriteAt([]byte("xy"), 999); err == nil {
		t.Fatal("WriteAt past the end succeeded")
	}
}

// TestUnsyncedTruncate: an unsynced truncate is applied or not; a synced one survives.
func TestUnsyncedTruncate(t *testing.T) {
	seen := map[int]int{}
	for seed := int64(1); seed <= 100; seed++ {
		d := New(seed)
		f := durableFile(t, d, "a", pattern(0, 50))
		if err := f.Truncate(10); err != nil {
			t.Fatal(err)
		}
		d.Crash()
		img, _ := contents(t, d, "a")
		if !bytes.Equal(img, pattern(0, len(img))) {
			t.Fatalf("seed %d: contents %q are not a prefix of the original", seed, img)
		}
		seen[len(img)]++
	}
	if diff := cmp.Diff([]int{10, 50}, sortedKeys(seen)); diff != "" {
		t.Errorf("sizes after crash (-want +got):\n%s", diff)
	}

	d := New(1)
	f := durableFile(t, d, "a", pattern(0, 50))
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	mustSync(t, f)
	d.Crash()
	if img, _ := contents(t, d, "a"); !bytes.Equal(img, pattern(0, 10)) {
		t.Errorf("synced truncate: got %q, want the first 10 bytes", img)
	}
}

func sortedKeys(m map[int]int) []int {
	var keys []int
	for k := 0; len(keys) < len(m); k++ {
		if _, ok := m[k]; ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// TestDirectoryCrash: creates, renames and removes are rolled back unless SyncDir followed.
func TestDirectoryCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  func(t *testing.T, d *Disk)
		want map[string]string // name -> contents after the crash
	}{
		{"unsynced create vanishes even with synced data", func(t *testing.T, d *Disk) {
			f := mustCreate(t, d, "new")
			mustWrite(t, f, []byte("data"))
			mustSync(t, f)
		}, map[string]string{"old": "OLD", "target": "TARGET"}},
		{"synced create survives", func(t *testing.T, d *Disk) {
			f := mustCreate(t, d, "new")
			mustWrite(t, f, []byte("data"))
			mustSync(t, f)
			mustSyncDir(t, d)
		}, map[string]string{"new": "data", "old": "OLD", "target": "TARGET"}},
		{"unsynced rename undone", func(t *testing.T, d *Disk) {
			if err := d.Rename("old", "target"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"old": "OLD", "target": "TARGET"}},
		{"synced rename survives", func(t *testing.T, d *Disk) {
			if err := d.Rename("old", "target"); err != nil {
				t.Fatal(err)
			}
			mustSyncDir(t, d)
		}, map[string]string{"target": "OLD"}},
		{"unsynced remove undone", func(t *testing.T, d *Disk) {
			if err := d.Remove("old"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"old": "OLD", "target": "TARGET"}},
		{"synced remove stays", func(t *testing.T, d *Disk) {
			if err := d.Remove("old"); err != nil {
				t.Fatal(err)
			}
			mustSyncDir(t, d)
		}, map[string]string{"target": "TARGET"}},
		{"compaction without the final SyncDir: the new file never existed", func(t *testing.T, d *Disk) {
			f := mustCreate(t, d, "target.compact")
			mustWrite(t, f, []byte("SNAPSHOT"))
			mustSync(t, f)
			if err := d.Rename("target.compact", "target"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"old": "OLD", "target": "TARGET"}},
		{"compaction with SyncDir after create, rename not synced", func(t *testing.T, d *Disk) {
			f := mustCreate(t, d, "target.compact")
			mustSyncDir(t, d)
			mustWrite(t, f, []byte("SNAPSHOT"))
			mustSync(t, f)
			if err := d.Rename("target.compact", "target"); err != nil {
				t.Fatal(err)
			}
		}, map[string]string{"old": "OLD", "target": "TARGET", "target.compact": "SNAPSHOT"}},
		{"Create over an existing file, unsynced: the old contents come back or not", func(t *testing.T, d *Disk) {
			f := mustCreate(t, d, "target")
			mustWrite(t, f, []byte("NEW"))
			mustSync(t, f)
		}, map[string]string{"old": "OLD", "target": "NEW"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := int64(1); seed <= 50; seed++ {
				d := New(seed)
				durableFile(t, d, "old", []byte("OLD"))
				durableFile(t, d, "target", []byte("TARGET"))
				tc.ops(t, d)
				// EntryDurable predicts what the crash leaves under "target".
				durable := d.EntryDurable("target")
				b, _ := contents(t, d, "target")
				d.Crash()
				if after, _ := contents(t, d, "target"); durable && string(after) != string(b) {
					t.Fatalf("seed %d: EntryDurable(target) said durable, but the crash left %q, not %q", seed, after, b)
				} else if !durable && string(after) == string(b) {
					t.Fatalf("seed %d: EntryDurable(target) said not durable, but the crash kept %q", seed, after)
				}
				check(t, d)
				got := map[string]string{}
				names, err := d.List()
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range names {
					b, _ := contents(t, d, name)
					got[name] = string(b)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Fatalf("seed %d: files after crash (-want +got):\n%s", seed, diff)
				}
			}
		})
	}
}

// TestFailedSyncLeavesWritesUndecided: after a failed Sync, a later successful Sync does not
// make the earlier writes durable (rule 4); the later writes are.
func TestFailedSyncLeavesWritesUndecided(t *testing.T) {
	seen := map[string]int{}
	for seed := int64(1); seed <= 100; seed++ {
		d := New(seed)
		f := durableFile(t, d, "a", []byte("S"))
		mustWrite(t, f, []byte("A"))
		d.FailNext(OpSync, nil)
		if err := f.Sync(); !errors.Is(err, ErrInjected) {
			t.Fatalf("Sync: %v, want ErrInjected", err)
		}
		mustWrite(t, f, []byte("B"))
		mustSync(t, f)
		d.Crash()
		img, _ := contents(t, d, "a")
		if len(img) != 3 || img[0] != 'S' || img[2] != 'B' {
			t.Fatalf("seed %d: %q, want S?B (S and B synced)", seed, img)
		}
		seen[string(img)]++
	}
	for _, want := range []string{"SAB", "S\x00B"} {
		if seen[want] == 0 {
			t.Errorf("outcome %q never occurred: %v", want, seen)
		}
	}
}

// TestFailedSyncDirLeavesEntriesUndecided: after a failed SyncDir the create may or may not
// survive; a later successful SyncDir settles it.
func TestFailedSyncDirLeavesEntriesUndecided(t *testing.T) {
	seen := map[bool]int{}
	for seed := int64(1); seed <= 50; seed++ {
		d := New(seed)
		mustCreate(t, d, "a")
		d.FailNext(OpSyncDir, nil)
		if err := d.SyncDir(); !errors.Is(err, ErrInjected) {
			t.Fatalf("SyncDir: %v, want ErrInjected", err)
		}
		d.Crash()
		_, ok := contents(t, d, "a")
		seen[ok]++
	}
	if seen[true] == 0 || seen[false] == 0 {
		t.Errorf("survived/vanished counts %v: want both", seen)
	}
	d := New(1)
	mustCreate(t, d, "a")
	d.FailNext(OpSyncDir, nil)
	d.SyncDir()
	mustSyncDir(t, d)
	d.Crash()
	if _, ok := contents(t, d, "a"); !ok {
		t.Error("a create covered by a successful SyncDir vanished")
	}
}

// TestDirPersist: with faults.Disk.DirPersist an in-order prefix of unsynced directory changes
// survives; every prefix length occurs.
func TestDirPersist(t *testing.T) {
	seen := map[string]int{}
	for seed := int64(1); seed <= 100; seed++ {
		d := New(seed)
		d.SetFaults(faults.Disk{DirPersist: 1})
		mustCreate(t, d, "a")
		mustCreate(t, d, "b")
		if err := d.Rename("a", "c"); err != nil {
			t.Fatal(err)
		}
		d.Crash()
		names, _ := d.List()
		seen[fmt.Sprint(names)]++
	}
	if diff := cmp.Diff([]string{"[]", "[a b]", "[a]", "[b c]"}, sortedStrings(seen)); diff != "" {
		t.Errorf("directories after crash (-want +got):\n%s", diff)
	}
}

func sortedStrings(m map[string]int) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	for i := range out { // insertion sort: tiny
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func TestCrashInvalidatesOpenFiles(t *testing.T) {
	d := New(1)
	f := durableFile(t, d, "a", []byte("x"))
	d.Crash()
	for _, c := range []struct {
		name string
		err  error
	}{
		{"Write", func() error { _, err := f.Write([]byte("y")); return err }()},
		{"ReadAt", func() error { _, err := f.ReadAt(make([]byte, 1), 0); return err }()},
		{"Sync", f.Sync()},
		{"Truncate", f.Truncate(0)},
		{"Size", func() error { _, err := f.Size(); return err }()},
		{"Close", f.Close()},
	} {
		if !errors.Is(c.err, ErrCrashed) {
			t.Errorf("%s on a File from before the crash: %v, want ErrCrashed", c.name, c.err)
		}
	}
	if img, _ := contents(t, d, "a"); string(img) != "x" {
		t.Errorf("contents %q, want x", img)
	}
}

// TestCrashAfter: the n-th mutating op from now and all later ones fail without effect; reads
// still work; Ops counts every mutating op; Crash clears the point.
func TestCrashAfter(t *testing.T) {
	d := New(1)
	f := durableFile(t, d, "a", []byte("AB")) // create, write, sync, syncdir
	if diff := cmp.Diff(4, d.Ops()); diff != "" {
		t.Fatalf("Ops after 4 mutating calls (-want +got):\n%s", diff)
	}
	d.CrashAfter(3)
	mustWrite(t, f, []byte("C")) // op 5: ok
	mustSync(t, f)               // op 6: ok
	if _, err := f.Write([]byte("D")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("op 7 (the 3rd from CrashAfter): %v, want ErrCrashed", err)
	}
	var errs []string
	for _, c := range []struct {
		name string
		err  error
	}{
		{"sync", f.Sync()},
		{"truncate", f.Truncate(0)},
		{"create", func() error { _, err := d.Create("b"); return err }()},
		{"rename", d.Rename("a", "b")},
		{"remove", d.Remove("a")},
		{"syncdir", d.SyncDir()},
	} {
		if !errors.Is(c.err, ErrCrashed) {
			errs = append(errs, fmt.Sprintf("%s: %v", c.name, c.err))
		}
	}
	if len(errs) > 0 {
		t.Errorf("after the crash point, calls did not fail with ErrCrashed: %v", errs)
	}
	if diff := cmp.Diff(13, d.Ops()); diff != "" {
		t.Errorf("Ops counts failed calls too (-want +got):\n%s", diff)
	}
	if size, err := f.Size(); err != nil || size != 3 {
		t.Errorf("Size after the crash point = %d, %v; want 3 (D never written), nil", size, err)
	}
	d.Crash()
	if img, _ := contents(t, d, "a"); string(img) != "ABC" {
		t.Errorf("after Crash: %q, want ABC (synced before the crash point)", img)
	}
	if _, err := d.Create("b"); err != nil {
		t.Errorf("Create after Crash: %v (Crash must clear the crash point)", err)
	}
}

// TestCrashPointEnumeration shows the pattern the journal uses: count the ops of a run, then
// crash at each one; every record whose Sync returned nil survives.
func TestCrashPointEnumeration(t *testing.T) {
	run := func(d *Disk) (acked int) {
		f, err := d.Create("log")
		if err != nil {
			return 0
		}
		if d.SyncDir() != nil {
			return 0
		}
		for i := range 5 {
			if _, err := f.Write(pattern(i*300, 300)); err != nil {
				return acked
			}
			if f.Sync() != nil {
				return acked
			}
			acked = i + 1
		}
		return acked
	}
	total := New(1)
	if got := run(total); got != 5 {
		t.Fatalf("run without a crash acknowledged %d, want 5", got)
	}
	n := total.Ops()
	for k := 1; k <= n; k++ {
		for seed := int64(1); seed <= 20; seed++ {
			d := New(seed)
			d.CrashAfter(k)
			acked := run(d)
			d.Crash()
			img, ok := contents(t, d, "log")
			if k > 2 && !ok {
				t.Fatalf("crash at op %d, seed %d: the dir-synced log vanished", k, seed)
			}
			if len(img) < acked*300 || !bytes.Equal(img[:acked*300], pattern(0, acked*300)) {
				t.Fatalf("crash at op %d, seed %d: %d acknowledged records, %d bytes survive", k, seed, acked, len(img))
			}
		}
	}
}

func TestFailNext(t *testing.T) {
	custom := errors.New("custom")
	for _, tc := range []struct {
		op   Op
		call func(d *Disk, f core.File) error
	}{
		{OpWrite, func(d *Disk, f core.File) error { _, err := f.Write([]byte("z")); return err }},
		{OpSync, func(d *Disk, f core.File) error { return f.Sync() }},
		{OpTruncate, func(d *Disk, f core.File) error { return f.Truncate(0) }},
		{OpCreate, func(d *Disk, f core.File) error { _, err := d.Create("b"); return err }},
		{OpRename, func(d *Disk, f core.File) error { return d.Rename("a", "b") }},
		{OpRemove, func(d *Disk, f core.File) error { return d.Remove("a") }},
		{OpSyncDir, func(d *Disk, f core.File) error { return d.SyncDir() }},
		{OpOpen, func(d *Disk, f core.File) error { _, err := d.Open("a"); return err }},
		{OpRead, func(d *Disk, f core.File) error { _, err := f.ReadAt(make([]byte, 1), 0); return err }},
		{OpList, func(d *Disk, f core.File) error { _, err := d.List(); return err }},
		{OpStat, func(d *Disk, f core.File) error { _, err := d.Stat("a"); return err }},
		{OpSize, func(d *Disk, f core.File) error { _, err := f.Size(); return err }},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			d := New(1)
			f := durableFile(t, d, "a", []byte("abc"))
			before := d.Dump()
			d.FailNext(tc.op, custom)
			d.FailNext(tc.op, nil)
			if err := tc.call(d, f); !errors.Is(err, custom) {
				t.Fatalf("first call: %v, want the custom error", err)
			}
			if err := tc.call(d, f); !errors.Is(err, ErrInjected) {
				t.Fatalf("second call: %v, want ErrInjected", err)
			}
			after := d.Dump()
			// Only the op counter may move.
			if diff := cmp.Diff(dropFirstLine(before), dropFirstLine(after)); diff != "" {
				t.Errorf("failed calls changed the disk (-want +got):\n%s", diff)
			}
			if err := tc.call(d, f); err != nil {
				t.Errorf("third call: %v, want success (faults are one-shot)", err)
			}
		})
	}
}

// TestFailAfter: the op takes effect (as osfs's create, rename or remove whose directory fsync
// failed), then reports the error; the change is durable only after a SyncDir, like any entry.
func TestFailAfter(t *testing.T) {
	custom := errors.New("dir fsync failed")
	for _, tc := range []struct {
		op        Op
		call      func(d *Disk) error
		wantNames []string // after the call
	}{
		{OpCreate, func(d *Disk) error {
			f, err := d.Create("b")
			if f != nil {
				t.Errorf("Create with an error returned a File")
			}
			return err
		}, []string{"a", "b"}},
		{OpRename, func(d *Disk) error { return d.Rename("a", "b") }, []string{"b"}},
		{OpRemove, func(d *Disk) error { return d.Remove("a") }, nil},
	} {
		t.Run(tc.op.String(), func(t *testing.T) {
			d := New(1)
			durableFile(t, d, "a", []byte("abc"))
			d.FailAfter(tc.op, custom)
			if err := tc.call(d); !errors.Is(err, custom) {
				t.Fatalf("call: %v, want the custom error", err)
			}
			names, err := d.List()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantNames, names, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("names after the call (-want +got):\n%s", diff)
			}
			mustSyncDir(t, d)
			d.Crash()
			if names, _ = d.List(); !cmp.Equal(tc.wantNames, names, cmpopts.EquateEmpty()) {
				t.Errorf("after SyncDir and a crash: %v, want %v", names, tc.wantNames)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("FailAfter(OpWrite) did not panic")
		}
	}()
	New(1).FailAfter(OpWrite, nil)
}

func dropFirstLine(s string) string {
	if i := bytes.IndexByte([]byte(s), '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func TestRandomFaults(t *testing.T) {
	t.Run("WriteErr writes a strict prefix", func(t *testing.T) {
		short := 0
		for seed := int64(1); seed <= 50; seed++ {
			d := New(seed)
			d.SetFaults(faults.Disk{WriteErr: 1})
			f := mustCreate(t, d, "a")
			n, err := f.Write([]byte("0123456789"))
			if !errors.Is(err, ErrInjected) || n >= 10 {
				t.Fatalf("Write = %d, %v; want < 10, ErrInjected", n, err)
			}
			if size, _ := f.Size(); size != int64(n) {
				t.Fatalf("Size %d after a short write of %d", size, n)
			}
			if n > 0 {
				short++
			}
			check(t, d)
		}
		if short == 0 {
			t.Error("a failed write never left a prefix behind")
		}
	})
	t.Run("RenameErr has no effect", func(t *testing.T) {
		d := New(1)
		d.SetFaults(faults.Disk{RenameErr: 1})
		mustCreate(t, d, "a")
		if err := d.Rename("a", "b"); !errors.Is(err, ErrInjected) {
			t.Fatalf("Rename: %v, want ErrInjected", err)
		}
		if names, _ := d.List(); !cmp.Equal([]string{"a"}, names) {
			t.Errorf("List after a failed rename: %v", names)
		}
	})
	t.Run("SyncErr leaves data undecided", func(t *testing.T) {
		lost := 0
		for seed := int64(1); seed <= 50; seed++ {
			d := New(seed)
			f := durableFile(t, d, "a", []byte("S"))
			d.SetFaults(faults.Disk{SyncErr: 1})
			mustWrite(t, f, []byte("A"))
			if err := f.Sync(); !errors.Is(err, ErrInjected) {
				t.Fatalf("Sync: %v", err)
			}
			d.Crash()
			img, _ := contents(t, d, "a")
			if !bytes.HasPrefix(img, []byte("S")) {
				t.Fatalf("seed %d: synced byte lost: %q", seed, img)
			}
			if string(img) == "S" {
				lost++
			}
		}
		if lost == 0 {
			t.Error("data under a failed sync always survived")
		}
	})
	t.Run("BitFlip at crash changes exactly one synced bit", func(t *testing.T) {
		d := New(1)
		d.SetFaults(faults.Disk{BitFlip: 1})
		durableFile(t, d, "a", pattern(0, 64))
		d.Crash()
		img, _ := contents(t, d, "a")
		if diff := bitsDiffer(pattern(0, 64), img); diff != 1 {
			t.Errorf("%d bits differ after a crash with BitFlip=1, want 1", diff)
		}
	})
	t.Run("SetFaults refuses a bad probability", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("SetFaults(SyncErr: 2) did not panic")
			}
		}()
		New(1).SetFaults(faults.Disk{SyncErr: 2})
	})
}

func bitsDiffer(a, b []byte) int {
	if len(a) != len(b) {
		return -1
	}
	n := 0
	for i := range a {
		for x := a[i] ^ b[i]; x != 0; x &= x - 1 {
			n++
		}
	}
	return n
}

func TestFlipBit(t *testing.T) {
	d := New(1)
	f := durableFile(t, d, "a", []byte{0, 0, 0})
	d.FlipBit("a", 1, 3)
	b := make([]byte, 3)
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]byte{0, 8, 0}, b); diff != "" {
		t.Errorf("read after FlipBit (-want +got):\n%s", diff)
	}
	d.Crash()
	img, _ := contents(t, d, "a")
	if diff := cmp.Diff([]byte{0, 8, 0}, img); diff != "" {
		t.Errorf("after crash (-want +got):\n%s", diff)
	}
	defer func() {
		if recover() == nil {
			t.Error("FlipBit past the synced data did not panic")
		}
	}()
	d.FlipBit("a", 3, 0)
}

// workload runs a fixed sequence of operations with three crashes and renders everything.
func workload(t *testing.T, seed int64) string {
	d := New(seed)
	var out bytes.Buffer
	for round := range 3 {
		f := mustCreate(t, d, fmt.Sprintf("f%d", round))
		g, err := d.Open("f0")
		if err != nil {
			t.Fatal(err)
		}
		for i := range 6 {
			mustWrite(t, g, pattern(i*97+round, 150+i*211))
			mustWrite(t, f, pattern(i, 333))
			if i%2 == 0 {
				mustSync(t, g)
			}
			if i == 3 {
				mustSyncDir(t, d)
			}
		}
		if round > 0 {
			if err := d.Rename(fmt.Sprintf("f%d", round), "renamed"); err != nil {
				t.Fatal(err)
			}
		}
		d.Crash()
		check(t, d)
		fmt.Fprintf(&out, "crash %d\n%s\n%s", round, d.LastCrash(), d.Dump())
		names, _ := d.List()
		for _, name := range names {
			b, _ := contents(t, d, name)
			fmt.Fprintf(&out, "%s %x\n", name, b)
		}
	}
	return out.String()
}

// TestDeterminism: the same seed and operations give the same disk byte for byte; seeds differ.
func TestDeterminism(t *testing.T) {
	a, b := workload(t, 7), workload(t, 7)
	if a != b {
		t.Fatalf("two runs with seed 7 differ (-first +second):\n%s", cmp.Diff(a, b))
	}
	differs := 0
	for seed := int64(8); seed < 18; seed++ {
		if workload(t, seed) != a {
			differs++
		}
	}
	if differs == 0 {
		t.Error("ten other seeds all produced the same disk as seed 7")
	}
}
