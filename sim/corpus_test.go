package sim_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/sluicehq/sluice/sim"
	"github.com/sluicehq/sluice/sim/corpus"
)

// TestCorpus replays every entry of corpus/sim/*.txt and compares its outcome and digest.
// After a deliberate behaviour change: check the runs, then rerun with -rewrite.
func TestCorpus(t *testing.T) {
	files, err := filepath.Glob("../corpus/sim/*.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no corpus entries in corpus/sim")
	}
	for _, f := range files {
		datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "run" {
				t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
			}
			var args []string
			for _, a := range d.CmdArgs {
				args = append(args, a.String())
			}
			e, err := corpus.ParseRunArgs(args)
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			res, err := sim.Run(e.Options())
			if err != nil {
				t.Fatalf("%s: %v", d.Pos, err)
			}
			return corpus.Outcome(res)
		})
	}
}

// TestParseCorpusMatchesDatadriven: simrun --replay's parser reads the same entries.
func TestParseCorpusMatchesDatadriven(t *testing.T) {
	files, _ := filepath.Glob("../corpus/sim/*.txt")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := corpus.Parse(f, string(data))
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		datadriven.RunTest(t, f, func(t *testing.T, d *datadriven.TestData) string {
			if i >= len(entries) {
				t.Fatalf("%s: datadriven sees more entries than ParseCorpus (%d)", f, len(entries))
			}
			e := entries[i]
			i++
			if got := d.CmdArgs[0].String(); got != "seed="+strconv.FormatInt(e.Seed, 10) {
				t.Errorf("%s: datadriven %s, ParseCorpus seed %d", d.Pos, got, e.Seed)
			}
			return d.Expected
		})
		if i != len(entries) {
			t.Errorf("%s: ParseCorpus found %d entries, datadriven %d", f, len(entries), i)
		}
	}
}
