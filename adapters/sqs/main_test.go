package sqs_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets the behaviour suite's cases, which mostly sleep on a real server, run all at
// once instead of GOMAXPROCS at a time, unless -parallel was given.
func TestMain(m *testing.M) {
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit {
		flag.Set("test.parallel", "16")
	}
	os.Exit(m.Run())
}
