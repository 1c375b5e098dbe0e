package journal

import (
	"os"
	"runtime"
	"testing"

	"github.com/sluicehq/sluice/adapters/osfs"
)

// TestMeasureOpenMemory reports the memory Open uses to replay a journal of about 1 GiB
// (1 KiB records, 1024 per batch) on the real disk. It is a measurement, not a check, and
// runs only when SLUICE_MEASURE_DIR names a directory on the disk to measure; the journal is
// written there and removed afterwards:
//
//	SLUICE_MEASURE_DIR=/some/disk/dir go test ./core/journal -run TestMeasureOpenMemory -v
func TestMeasureOpenMemory(t *testing.T) {
	dir := os.Getenv("SLUICE_MEASURE_DIR")
	if dir == "" {
		t.Skip("set SLUICE_MEASURE_DIR to a directory on the disk to measure")
	}
	dir, err := os.MkdirTemp(dir, "journal-measure-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fsys, err := osfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	const dataLen, perBatch = 1024, 1024
	records := (1 << 30) / (frameMin + dataLen)
	f, err := fsys.Create("j")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, dataLen)
	chunk := appendHeader(nil, 0)
	for i := 0; i < records; i++ {
		flags := uint8(0)
		if (i+1)%perBatch == 0 || i == records-1 {
			flags = flagEnd
		}
		chunk = appendFrame(chunk, LSN(i+1), uint64(i/perBatch+1), flags, 1, data)
		if len(chunk) >= 16<<20 || i == records-1 {
			if _, err := f.Write(chunk); err != nil {
				t.Fatal(err)
			}
			chunk = chunk[:0]
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	size, _ := f.Size()
	f.Close()
	chunk = nil

	runtime.GC()
	var before, ms runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapAlloc
	n := 0
	j, err := Open(fsys, "j", Config{}, func(Record) error {
		n++
		if n%(records/16) == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	peak = max(peak, ms.HeapAlloc)
	j.Close()
	if n != records {
		t.Fatalf("replayed %d records, want %d", n, records)
	}
	t.Logf("journal of %d bytes, %d records: peak heap during Open %.1f MiB above the %.1f MiB before it; TotalAlloc during Open %.1f MiB",
		size, n, float64(peak-before.HeapAlloc)/(1<<20), float64(before.HeapAlloc)/(1<<20),
		float64(ms.TotalAlloc-before.TotalAlloc)/(1<<20))
}
