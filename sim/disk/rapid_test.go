package disk

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/core"
	"pgregory.net/rapid"
)

// modelWrite is one write as the model sees it: durable once a Sync succeeded with no failed
// Sync between the write and it.
type modelWrite struct {
	off     int
	data    []byte
	durable bool
	doomed  bool // a failed Sync covered it: never durable until a crash settles it
}

// TestPropertySyncedWritesSurviveCrashAndReadsMatchModel drives one dir-synced file with
// random appends, syncs (some failing) and crashes. Properties: reads always equal the model's
// contents; after a crash every durable write is intact and the file does not extend past the
// sector holding the last written byte; the invariants hold after every action.
func TestPropertySyncedWritesSurviveCrashAndReadsMatchModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		d := New(rapid.Int64().Draw(rt, "seed"))
		var f core.File
		var writes []modelWrite
		var current []byte
		reopen := func() {
			var err error
			if f, err = d.Open("a"); err != nil {
				rt.Fatalf("Open: %v", err)
			}
		}
		var err error
		if f, err = d.Create("a"); err != nil {
			rt.Fatal(err)
		}
		if err := d.SyncDir(); err != nil {
			rt.Fatal(err)
		}
		rt.Repeat(map[string]func(*rapid.T){
			"write": func(rt *rapid.T) {
				n := rapid.IntRange(1, 1500).Draw(rt, "n")
				p := pattern(len(current), n)
				if k, err := f.Write(p); err != nil || k != n {
					rt.Fatalf("Write: %d, %v", k, err)
				}
				writes = append(writes, modelWrite{off: len(current), data: p})
				current = append(current, p...)
			},
			"sync": func(rt *rapid.T) {
				if err := f.Sync(); err != nil {
					rt.Fatalf("Sync: %v", err)
				}
				for i := range writes {
					if !writes[i].doomed {
						writes[i].durable = true
					}
				}
			},
			"failSync": func(rt *rapid.T) {
				d.FailNext(OpSync, nil)
				if err := f.Sync(); err == nil {
					rt.Fatal("Sync with FailNext succeeded")
				}
				for i := range writes {
					if !writes[i].durable {
						writes[i].doomed = true
					}
				}
			},
			"crash": func(rt *rapid.T) {
				d.Crash()
				reopen()
				size, err := f.Size()
				if err != nil {
					rt.Fatal(err)
				}
				img := make([]byte, size)
				if size > 0 {
					if _, err := f.ReadAt(img, 0); err != nil {
						rt.Fatal(err)
					}
				}
				for _, w := range writes {
					if w.durable && (len(img) < w.off+len(w.data) || !bytes.Equal(img[w.off:w.off+len(w.data)], w.data)) {
						rt.Fatalf("durable write %d+%d lost or changed after crash:\n%s", w.off, len(w.data), d.LastCrash())
					}
				}
				if len(img) > roundUp(len(current)) {
					rt.Fatalf("%d bytes after crash, past the sector %d of the last written byte:\n%s", len(img), roundUp(len(current)), d.LastCrash())
				}
				current = img
				writes = []modelWrite{{off: 0, data: append([]byte(nil), img...), durable: true}}
			},
			"": func(rt *rapid.T) {
				if err := d.checkInvariants(); err != nil {
					rt.Fatal(err)
				}
				got := make([]byte, len(current))
				if len(got) > 0 {
					if _, err := f.ReadAt(got, 0); err != nil {
						rt.Fatal(err)
					}
				}
				if size, _ := f.Size(); size != int64(len(current)) || !bytes.Equal(got, current) {
					rt.Fatal(fmt.Sprintf("reads differ from the model (size %d, model %d)", size, len(current)))
				}
			},
		})
	})
}
