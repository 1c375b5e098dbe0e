package faults

import (
	"errors"
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPickEveryProfileIsValidAndDeterministic(t *testing.T) {
	for _, p := range Profiles {
		for seed := int64(0); seed < 200; seed++ {
			a, err := Pick(p, rand.New(rand.NewSource(seed)))
			if err != nil {
				t.Fatalf("Pick(%s, seed %d): %v", p, seed, err)
			}
			b, _ := Pick(p, rand.New(rand.NewSource(seed)))
			if diff := cmp.Diff(a, b); diff != "" {
				t.Fatalf("Pick(%s, seed %d) not deterministic (-first +second):\n%s", p, seed, diff)
			}
			if err := a.Validate(); err != nil {
				t.Fatalf("Pick(%s, seed %d) invalid: %v", p, seed, err)
			}
		}
	}
}

func TestPickProfilesPinTheirFamilies(t *testing.T) {
	r := func() *rand.Rand { return rand.New(rand.NewSource(7)) }
	calm, _ := Pick("calm", r())
	if calm.Disk != (Disk{}) || calm.Transport.On() || calm.Process.On() || calm.Timing.On() || calm.ExpectRefusal {
		t.Errorf("calm injects faults: %+v", calm)
	}
	disk, _ := Pick("disk", r())
	if disk.Disk == (Disk{}) || disk.Process.NodeCrash == 0 || disk.Process.CommitCrash == 0 || disk.Transport.On() {
		t.Errorf("disk profile: %+v", disk)
	}
	network, _ := Pick("network", r())
	if !network.Transport.On() || network.Disk != (Disk{}) || network.Process.NodeCrash != 0 {
		t.Errorf("network profile: %+v", network)
	}
	bitflip, _ := Pick("bitflip", r())
	if !bitflip.ExpectRefusal || bitflip.Process.NodeCrash == 0 {
		t.Errorf("bitflip profile: %+v", bitflip)
	}
	if _, err := Pick("nope", r()); !errors.Is(err, ErrUnknownProfile) {
		t.Errorf("Pick(nope) = %v, want ErrUnknownProfile", err)
	}
}

// Profiles draw the same values, so a seed's later draws do not depend on the profile.
func TestPickConsumesTheSameDraws(t *testing.T) {
	var next []int64
	for _, p := range Profiles {
		r := rand.New(rand.NewSource(42))
		if _, err := Pick(p, r); err != nil {
			t.Fatal(err)
		}
		next = append(next, r.Int63())
	}
	for i := range next {
		if next[i] != next[0] {
			t.Fatalf("profile %s leaves the stream at %d, %s at %d", Profiles[i], next[i], Profiles[0], next[0])
		}
	}
}

func TestTransportDraw(t *testing.T) {
	tr := Transport{FailBefore: 0.1, FailAfter: 0.2, Stale: 0.1}
	r := rand.New(rand.NewSource(1))
	counts := map[Call]int{}
	const n = 100000
	for i := 0; i < n; i++ {
		counts[tr.Draw(r, true)]++
	}
	for _, c := range []struct {
		call Call
		want float64
	}{{CallOK, 0.6}, {CallFailBefore, 0.1}, {CallFailAfter, 0.2}, {CallStale, 0.1}, {CallThrottle, 0}} {
		got := float64(counts[c.call]) / n
		if got < c.want-0.01 || got > c.want+0.01 {
			t.Errorf("P(%s) = %.3f, want %.2f", c.call, got, c.want)
		}
	}
	// A call naming no receipt cannot be answered stale.
	for i := 0; i < 1000; i++ {
		if c := tr.Draw(r, false); c == CallStale {
			t.Fatal("Draw(namesReceipt=false) returned CallStale")
		}
	}
}

func TestLatencyRanges(t *testing.T) {
	tr := Transport{LatencyMin: 2 * time.Millisecond, LatencyMax: 50 * time.Millisecond,
		Spike: 0.5, SpikeMin: 5 * time.Second, SpikeMax: 40 * time.Second}
	r := rand.New(rand.NewSource(3))
	spikes := 0
	for i := 0; i < 10000; i++ {
		d, spiked := tr.Latency(r)
		lo, hi := tr.LatencyMin, tr.LatencyMax
		if spiked {
			spikes++
			lo, hi = tr.SpikeMin, tr.SpikeMax
		}
		if d < lo || d > hi {
			t.Fatalf("latency %v outside [%v, %v] (spiked %t)", d, lo, hi, spiked)
		}
	}
	if spikes < 4500 || spikes > 5500 {
		t.Errorf("%d spikes in 10000 draws at P=0.5", spikes)
	}
}

func TestValidateRejects(t *testing.T) {
	for _, s := range []Set{
		{Transport: Transport{FailBefore: 1.5}},
		{Transport: Transport{FailBefore: 0.6, FailAfter: 0.6}},
		{Transport: Transport{LatencyMin: time.Second, LatencyMax: time.Millisecond}},
		{Process: Process{NodeCrash: -0.1}},
		{Process: Process{RestartMin: time.Second}},
		{Timing: Timing{Burst: 2}},
	} {
		if err := s.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil, want an error", s)
		}
	}
}

// Every swarm kind has its own draw: no two disk kinds are ever the same scaled draw, and a
// marathon is on for runs whose long-handler rate is high as well as low.
func TestSwarmKindsDrawIndependently(t *testing.T) {
	same, marathonHighLong, damage, crashPoint, late, bunch, reorder := 0, 0, 0, 0, 0, 0, 0
	for seed := int64(0); seed < 2000; seed++ {
		s, err := Pick("swarm", rand.New(rand.NewSource(seed)))
		if err != nil {
			t.Fatal(err)
		}
		d := s.Disk
		if d.WriteErr > 0 && d.CreateErr == d.WriteErr || d.SyncErr > 0 && d.RemoveErr == d.SyncErr ||
			d.RenameErr > 0 && d.TruncateErr == d.RenameErr/5 {
			same++
		}
		if s.Timing.Marathon > 0 && s.Timing.LongHandler >= 0.06 {
			marathonHighLong++
		}
		for _, c := range []struct {
			on bool
			n  *int
		}{{s.ExpectRefusal, &damage}, {s.Process.CrashPoint > 0, &crashPoint}, {s.Timing.Late > 0, &late},
			{s.Timing.Bunch > 0, &bunch}, {s.Timing.Reorder > 0, &reorder}} {
			if c.on {
				*c.n++
			}
		}
	}
	if same != 0 {
		t.Errorf("%d seeds draw two disk kinds from one value", same)
	}
	if marathonHighLong == 0 {
		t.Error("a marathon is only ever on when long handlers are rare (Marathon shares LongHandler's draw)")
	}
	for name, n := range map[string]int{"damage": damage, "crash-point": crashPoint, "late": late, "bunch": bunch, "reorder": reorder} {
		if n < 50 {
			t.Errorf("family %s on in %d of 2000 swarm seeds, want it in the default swarm", name, n)
		}
	}
}
