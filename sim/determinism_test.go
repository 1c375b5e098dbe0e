package sim

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

func runBytes(t testing.TB, seed int64, profile string, trace bool) []byte {
	t.Helper()
	var b bytes.Buffer
	o := Options{Seed: seed, Profile: profile}
	if trace {
		o.Trace = &b
	}
	res, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := res.Report(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestSameSeedSameBytes runs seeds of every profile twice, trace included, and compares the
// output byte for byte (run it under -race too: the runs share nothing).
func TestSameSeedSameBytes(t *testing.T) {
	for _, profile := range []string{"swarm", "calm", "disk", "network", "bitflip"} {
		for _, seed := range []int64{1, 2, 42} {
			a := runBytes(t, seed, profile, true)
			b := runBytes(t, seed, profile, true)
			if !bytes.Equal(a, b) {
				t.Errorf("seed %d profile %s: two runs differ (%d vs %d bytes)", seed, profile, len(a), len(b))
			}
		}
	}
}

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

// TestSweep runs 200 seeds of the swarm and 25 of each pinned profile (ten times as many with
// SLUICE_LONG=1) and fails on any violation, printing each failing seed's report.
func TestSweep(t *testing.T) {
	scale := 1
	if os.Getenv("SLUICE_LONG") != "" {
		scale = 10
	}
	failed := 0
	for _, p := range []struct {
		profile string
		seeds   int
	}{{"swarm", 200}, {"calm", 25}, {"disk", 25}, {"network", 25}, {"bitflip", 25}} {
		for seed := int64(1); seed <= int64(p.seeds*scale); seed++ {
			res, err := Run(Options{Seed: seed, Profile: p.profile})
			if err != nil {
				t.Fatal(err)
			}
			if !res.OK() {
				failed++
				var b bytes.Buffer
				res.Report(&b)
				t.Errorf("seed %d profile %s: %v\n%s", seed, p.profile, res.Violation, b.String())
				if failed >= 3 {
					t.Fatalf("stopping after %d failing seeds", failed)
				}
			}
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
