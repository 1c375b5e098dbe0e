package sim

import (
	"fmt"
	"testing"
	"time"
)

// TestSeedsDiffer guards against a world that ignores its seed.
func TestSeedsDiffer(t *testing.T) {
	a, _ := Run(Options{Seed: 1})
	b, _ := Run(Options{Seed: 2})
	if a.Digest == b.Digest {
		t.Fatalf("seeds 1 and 2 produced the same trace digest %s", a.Digest)
	}
}

// TestStreamsIndependent: a stream's draws depend only on (seed, name).
func TestStreamsIndependent(t *testing.T) {
	a := Stream(7, "disk/1").Int63()
	w := Stream(7, "workload")
	for i := 0; i < 1000; i++ {
		w.Int63()
	}
	if b := Stream(7, "disk/1").Int63(); a != b {
		t.Fatalf("stream disk/1 changed: %d then %d", a, b)
	}
	if Stream(7, "disk/1").Int63() == Stream(7, "disk/2").Int63() {
		t.Fatal("streams disk/1 and disk/2 start alike")
	}
	if Stream(7, "disk/1").Int63() == Stream(8, "disk/1").Int63() {
		t.Fatal("seeds 7 and 8 give the same disk/1 stream")
	}
}

func TestOffset(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0.000s"}, {time.Millisecond, "0.001s"}, {12*time.Second + 345*time.Millisecond, "12.345s"},
		{time.Nanosecond, "0.000000001s"}, {1500 * time.Microsecond, "0.0015s"}, {-time.Second, "-1.000s"},
	} {
		if got := Offset(c.d); got != c.want {
			t.Errorf("Offset(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

func BenchmarkSimulator(b *testing.B) {
	var simTotal time.Duration
	seeds := 0
	start := time.Now()
	for i := 0; i < b.N; i++ {
		res, err := Run(Options{Seed: int64(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		simTotal += res.End
		seeds++
	}
	wall := time.Since(start)
	b.ReportMetric(simTotal.Seconds()/wall.Seconds(), "sim-s/wall-s")
	b.ReportMetric(float64(seeds)/wall.Minutes(), "seeds/min")
	_ = fmt.Sprint()
}
