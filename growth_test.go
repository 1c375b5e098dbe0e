package sluice

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/journal"
)

// A service restarted before its journal grows by CompactBytes still compacts: the threshold
// counts the batches after the last snapshot as the file holds them, not what this process
// wrote. Many short lives (open, 100 enqueues, close), and the journal an open reads stays
// within one snapshot plus CompactBytes (plus the batch that crossed it).
func TestShortLivesKeepTheJournalSmall(t *testing.T) {
	const (
		lives        = 30
		perLife      = 100
		compactBytes = 64 << 10
	)
	dir := t.TempDir()
	ctx := context.Background()
	cfg := Config{Logger: quiet, CompactBytes: compactBytes}
	payload := strings.Repeat("p", 200)
	var compactions int64
	var maxGrowth, maxFile int64
	for life := range lives {
		r, err := Open(dir, cfg, JSON[string](), succeed)
		if err != nil {
			t.Fatalf("life %d: %v", life, err)
		}
		for i := range perLife {
			if _, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "t", payload); err != nil {
				t.Fatalf("life %d, enqueue %d: %v", life, i, err)
			}
		}
		compactions += readStats(t, r).Compactions
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		tail := readTail(t, dir)
		maxGrowth = max(maxGrowth, tail.Cut-tail.Base)
		maxFile = max(maxFile, tail.Cut)
	}
	// One enqueue is one batch here (each waits for its ack): the batch that crossed the
	// threshold is one record.
	if maxGrowth > compactBytes+1024 {
		t.Errorf("the journal grew to %d bytes beyond its snapshot, over CompactBytes (%d) plus one batch", maxGrowth, compactBytes)
	}
	if compactions == 0 {
		t.Errorf("%d lives of %d enqueues with CompactBytes %d: no compaction", lives, perLife, compactBytes)
	}
	t.Logf("%d lives: %d compactions, largest file %d bytes, largest growth beyond the snapshot %d", lives, compactions, maxFile, maxGrowth)
}

// readTail reads the journal in dir without writing.
func readTail(t *testing.T, dir string) journal.Tail {
	t.Helper()
	fsys, err := osfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	tail, err := journal.Read(fsys, filepath.Base(journalName), journal.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tail
}
