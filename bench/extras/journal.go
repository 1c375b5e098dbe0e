// Package extras measures the sluice-only figures of docs/BENCHMARKS.md: journal replay
// and runner recovery speed, compaction time against live state, the
// simulator's speed and the lease controller's cost per action.
package extras

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/journal"
)

// Row is one line of an extras table.
type Row []string

// Table is a titled table with a header row.
type Table struct {
	Title string
	Notes []string
	Rows  []Row // Rows[0] is the header
}

// JournalReplay writes journals of each size (records of recBytes, committed
// in batches of batch) and times journal.Open replaying them. The file was
// just written, so it is read from the page cache: this is replay CPU cost,
// not cold-disk read time.
func JournalReplay(scratch string, sizes []int, recBytes, batch int) (Table, error) {
	t := Table{
		Title: fmt.Sprintf("journal replay (core/journal.Open over adapters/osfs, %d-byte records, %d per batch, warm page cache)", recBytes, batch),
		Rows:  []Row{{"records", "file MB", "write s", "open s", "replayed records/s", "MB/s"}},
	}
	for _, n := range sizes {
		dir := filepath.Join(scratch, fmt.Sprintf("journal-%d", n))
		fsys, err := osfs.New(dir)
		if err != nil {
			return t, err
		}
		j, err := journal.Open(fsys, "j", journal.Config{}, nil)
		if err != nil {
			return t, err
		}
		data := make([]byte, recBytes)
		t0 := time.Now()
		for i := 0; i < n; i++ {
			data[0] = byte(i)
			if _, err := j.Append(1, data); err != nil {
				return t, err
			}
			if (i+1)%batch == 0 || i == n-1 {
				if _, err := j.Commit(); err != nil {
					return t, err
				}
			}
		}
		write := time.Since(t0)
		if err := j.Close(); err != nil {
			return t, err
		}
		size, err := fsys.Stat("j")
		if err != nil {
			return t, err
		}
		count := 0
		t1 := time.Now()
		j2, err := journal.Open(fsys, "j", journal.Config{}, func(r journal.Record) error {
			count++
			return nil
		})
		open := time.Since(t1)
		if err != nil {
			return t, err
		}
		j2.Close()
		fsys.Close()
		os.RemoveAll(dir)
		if count != n {
			return t, fmt.Errorf("journal replay: wrote %d records, replayed %d", n, count)
		}
		mb := float64(size) / (1 << 20)
		t.Rows = append(t.Rows, Row{
			fmt.Sprint(n), fmt.Sprintf("%.1f", mb), fmt.Sprintf("%.3f", write.Seconds()), fmt.Sprintf("%.3f", open.Seconds()),
			fmt.Sprintf("%.0f", float64(n)/open.Seconds()), fmt.Sprintf("%.0f", mb/open.Seconds()),
		})
	}
	return t, nil
}
