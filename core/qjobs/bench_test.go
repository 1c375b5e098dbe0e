package qjobs

import (
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/flow"
)

// BenchmarkJobLayer is the job layer's own cost per job over the raw worker, through the host
// as a driver uses it: Deliver (decode, admit with the breaker) and AttemptDone with success;
// and with a retryable failure (backoff draw, hide). Encode is the enqueue side's.
func BenchmarkJobLayer(b *testing.B) {
	c := testConfig()
	c.Rand = rand.New(rand.NewSource(1))
	c.Circuit.Threshold = 1 << 20 // the breaker stays closed: every delivery runs
	m, err := New(c)
	if err != nil {
		b.Fatal(err)
	}
	if err := m.Step(Register{Kind: "email"}); err != nil {
		b.Fatal(err)
	}
	bodies := make([]core.Message, 64)
	for i := range bodies {
		out := Encode(Attrs{Kind: "email", Target: "smtp-" + strconv.Itoa(i%8), FirstDue: t0}, []byte(`{"To":"ada@example.com"}`))
		bodies[i] = core.Message{Body: out.Body, Attributes: out.Attributes}
	}
	for _, retry := range []bool{false, true} {
		name := "success"
		if retry {
			name = "retryable"
		}
		b.Run(name, func(b *testing.B) {
			now := t0
			receipt := "r"
			for i := range b.N {
				now = now.Add(time.Millisecond)
				if err := m.Step(Deliver{Now: now, Receipt: receipt, Message: bodies[i%len(bodies)]}); err != nil {
					b.Fatal(err)
				}
				if rd := m.Ready(); len(rd.Runs) == 0 {
					b.Fatalf("delivery %d: %+v, want a run", i, rd)
				}
				o := Outcome{Result: Success}
				if retry && i%4 == 0 {
					o = Outcome{Result: Retryable, Err: "421"}
				}
				if err := m.Step(AttemptDone{Receipt: receipt, Now: now, Outcome: o}); err != nil {
					b.Fatal(err)
				}
				m.Ready()
			}
		})
	}
	b.Run("encode", func(b *testing.B) {
		a := Attrs{Kind: "email", Target: "smtp", FirstDue: t0}
		payload := []byte(`{"To":"ada@example.com"}`)
		for range b.N {
			Encode(a, payload)
		}
	})
}

// BenchmarkFlow is the job layer's cost per delivery with flow limits, over 1,000 flow keys:
// none configured (the baseline), configured but not binding (a kind rate, a key rate and a
// key limit far above the load), and binding (a key limit of 1 and a key rate of 1/s, each key
// delivered every 100 ms: nine deliveries in ten wait, a re-send each). Each op is one delivery
// to its Done.
func BenchmarkFlow(b *testing.B) {
	const keys = 1000
	bodies := make([]core.Message, keys)
	for i := range bodies {
		out := Encode(Attrs{Kind: "email", Target: "smtp", FirstDue: t0, Key: "tenant-" + strconv.Itoa(i)}, []byte(`{"To":"ada@example.com"}`))
		bodies[i] = core.Message{Body: out.Body, Attributes: out.Attributes, ReceiveCount: 1}
	}
	for _, bc := range []struct {
		name string
		f    Flow
	}{
		{"none", Flow{}},
		{"not-binding", Flow{Rate: flowRate(1_000_000), KeyRate: flowRate(100_000), KeyLimit: 64}},
		{"binding", Flow{KeyRate: flowRate(1), KeyLimit: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := testConfig()
			c.Circuit.Threshold = 1 << 20
			m, err := New(c)
			if err != nil {
				b.Fatal(err)
			}
			if err := m.Step(Register{Kind: "email", Flow: bc.f}); err != nil {
				b.Fatal(err)
			}
			now := t0
			waits := 0
			for i := range b.N {
				now = now.Add(100 * time.Microsecond) // each key every 100 ms
				if err := m.Step(Deliver{Now: now, Receipt: "r", Message: bodies[i%keys]}); err != nil {
					b.Fatal(err)
				}
				rd := m.Ready()
				var ev Event = AttemptDone{Receipt: "r", Now: now, Outcome: Outcome{Result: Success}}
				if len(rd.Runs) == 0 {
					waits++
					ev = SendDone{Receipt: "r", Now: now}
				}
				if err := m.Step(ev); err != nil {
					b.Fatal(err)
				}
				m.Ready()
			}
			b.ReportMetric(float64(waits)/float64(b.N), "waits/op")
		})
	}
}

func flowRate(perSecond int) flow.Rate { return flow.Rate{Count: perSecond, Per: time.Second} }
