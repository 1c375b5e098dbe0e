package journal

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core"
)

// countingFS counts File.Sync calls on a real directory.
type countingFS struct {
	core.FS
	syncs *int
}

func (c countingFS) Create(name string) (core.File, error) {
	f, err := c.FS.Create(name)
	return countingFile{f, c.syncs}, err
}

func (c countingFS) Open(name string) (core.File, error) {
	f, err := c.FS.Open(name)
	return countingFile{f, c.syncs}, err
}

type countingFile struct {
	core.File
	syncs *int
}

func (c countingFile) Sync() error { *c.syncs++; return c.File.Sync() }

func benchFS(b *testing.B) (core.FS, *int) {
	b.Helper()
	fsys, err := osfs.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { fsys.Close() })
	syncs := new(int)
	return countingFS{fsys, syncs}, syncs
}

// appendRecords appends n records of data to j, committing every perCommit, and returns the
// wall time taken.
func appendRecords(b *testing.B, j *Journal, n, perCommit int, data []byte) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		if _, err := j.Append(1, data); err != nil {
			b.Fatal(err)
		}
		if j.Buffered() == perCommit || i == n-1 {
			if _, err := j.Commit(); err != nil {
				b.Fatal(err)
			}
		}
	}
	return time.Since(start)
}

// BenchmarkCommit measures durable records per second on the real disk (adapters/osfs in a
// temp dir; 64-byte records) with group commit against one Commit (one fsync) per record.
// The baseline runs in the same benchmark, interleaved with the measured chunks so that both
// see the same disk and machine load: x-vs-one-per-commit is the speed-up.
func BenchmarkCommit(b *testing.B) {
	data := make([]byte, 64)
	const chunk, baselinePerChunk, baselineMin = 1024, 16, 200
	for _, perCommit := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("records-per-commit=%d", perCommit), func(b *testing.B) {
			fsys, syncs := benchFS(b)
			j, err := Open(fsys, "j", Config{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			appendRecords(b, j, 64, 1, data) // warm up
			var took, baseTook time.Duration
			var baseN, groupSyncs int
			b.ResetTimer()
			for done := 0; done < b.N; {
				n := min(chunk, b.N-done)
				before := *syncs
				took += appendRecords(b, j, n, perCommit, data)
				groupSyncs += *syncs - before
				done += n
				b.StopTimer()
				k := baselinePerChunk
				if done == b.N {
					k = max(k, baselineMin-baseN)
				}
				baseTook += appendRecords(b, j, k, 1, data)
				baseN += k
				b.StartTimer()
			}
			b.StopTimer()
			rate := float64(b.N) / took.Seconds()
			baseRate := float64(baseN) / baseTook.Seconds()
			b.ReportMetric(rate, "records/s")
			b.ReportMetric(float64(groupSyncs)/float64(b.N), "fsyncs/record")
			b.ReportMetric(baseRate, "baseline-records/s")
			b.ReportMetric(rate/baseRate, "x-vs-one-per-commit")
		})
	}
}

// BenchmarkOpenReplay measures recovery: opening a journal of 1 M records (64-byte data, in
// batches of 1024) on the real disk and replaying every record, against reading the same
// bytes without decoding them (x-vs-raw-read is replay time over read time).
func BenchmarkOpenReplay(b *testing.B) {
	const records, perBatch = 1_000_000, 1024
	data := make([]byte, 64)
	file := appendHeader(nil, 0)
	for i := 0; i < records; i++ {
		flags := uint8(0)
		if (i+1)%perBatch == 0 || i == records-1 {
			flags = flagEnd
		}
		file = appendFrame(file, LSN(i+1), uint64(i/perBatch+1), flags, 1, data)
	}
	fsys, _ := benchFS(b)
	f, err := fsys.Create("j")
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(file); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	fsys.SyncDir()

	readOnce := func() time.Duration {
		start := time.Now()
		f, err := fsys.Open("j")
		if err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, len(file))
		if _, err := f.ReadAt(buf, 0); err != nil {
			b.Fatal(err)
		}
		f.Close()
		return time.Since(start)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(file)))
	var replayed int
	var readTook, openTook time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		readTook += readOnce()
		b.StartTimer()
		start := time.Now()
		n := 0
		j, err := Open(fsys, "j", Config{}, func(Record) error { n++; return nil })
		if err != nil {
			b.Fatal(err)
		}
		openTook += time.Since(start)
		j.Close()
		replayed += n
	}
	if replayed != b.N*records {
		b.Fatalf("replayed %d records, want %d", replayed, b.N*records)
	}
	b.ReportMetric(float64(replayed)/openTook.Seconds(), "records/s")
	b.ReportMetric(openTook.Seconds()/readTook.Seconds(), "x-vs-raw-read")
}

// BenchmarkScan measures the scanner alone on 1 M records in memory.
func BenchmarkScan(b *testing.B) {
	const records = 1_000_000
	data := make([]byte, 64)
	file := appendHeader(nil, 0)
	for i := 0; i < records; i++ {
		flags := uint8(0)
		if (i+1)%1024 == 0 || i == records-1 {
			flags = flagEnd
		}
		file = appendFrame(file, LSN(i+1), uint64(i/1024+1), flags, 1, data)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(file)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		n := 0
		if _, err := Scan(file, func(Record) error { n++; return nil }); err != nil || n != records {
			b.Fatalf("Scan: %d records, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.N*records)/time.Since(start).Seconds(), "records/s")
}

// BenchmarkCompact measures compaction time against the snapshot's size on the real disk.
func BenchmarkCompact(b *testing.B) {
	for _, size := range []int{1 << 20, 16 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("snapshot=%dMiB", size>>20), func(b *testing.B) {
			fsys, _ := benchFS(b)
			j, err := Open(fsys, "j", Config{}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer j.Close()
			snap := make([]byte, size)
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := j.Compact(9, snap); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
