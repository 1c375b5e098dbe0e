package config

import (
	"hash/fnv"
	"strconv"
	"testing"
)

// fnv64a must stay hash/fnv's sum: stream seeds, hence every run, depend on it.
func TestFNV64a(t *testing.T) {
	for i := 0; i < 500; i++ {
		name := "stream/" + strconv.Itoa(i) + string(rune(i))
		h := fnv.New64a()
		h.Write([]byte(name))
		if got, want := fnv64a(name), h.Sum64(); got != want {
			t.Fatalf("%q: %x, want %x", name, got, want)
		}
	}
}
