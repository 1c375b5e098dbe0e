package lease

import (
	"flag"
	"os"
	"testing"
)

// TestMain raises rapid's effort when SLUICE_LONG is set (the default run stays fast).
func TestMain(m *testing.M) {
	flag.Parse()
	if os.Getenv("SLUICE_LONG") != "" {
		if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == "100" {
			_ = f.Value.Set("5000")
		}
		if f := flag.Lookup("rapid.steps"); f != nil && f.Value.String() == "30" {
			_ = f.Value.Set("300")
		}
	}
	os.Exit(m.Run())
}
