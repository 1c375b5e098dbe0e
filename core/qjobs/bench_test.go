package qjobs

import (
	"math/rand"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
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
