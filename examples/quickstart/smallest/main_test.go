package main

import "testing"

// TestCompiles exists so that `go test ./...` compiles this program (a package without test
// files is listed, not built): doc.go shows it, and it must keep compiling. Running it would
// start a runner until interrupted, so the test does not.
func TestCompiles(t *testing.T) {
	var _ = main
}
