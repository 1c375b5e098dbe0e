package sluicetest

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// shipping is a worker scenario: each message ships one order through a "ship" service, with
// or without an idempotency key.
func shipping(idem bool, f ServiceFaults) WorkerScenario {
	return WorkerScenario{
		Config: sluice.WorkerConfig{Window: 5 * time.Second, Concurrency: 2, Budget: 20,
			Policy: sluice.Policy{Base: 100 * time.Millisecond, Cap: time.Second}, Grace: time.Second},
		Setup: func(env *Env) sluice.WorkerHandler {
			ship := env.Service("ship", f)
			return func(ctx context.Context, m sluice.Message) error {
				key := ""
				if idem {
					key = "ship-" + string(m.Body)
				}
				_, err := ship.Do(ctx, Request{Op: "ship", Key: string(m.Body), IdempotencyKey: key})
				return err
			}
		},
		Workload: func(r *rand.Rand, p *Sends) {
			for i := range 1 + r.Intn(6) {
				p.Send(time.Duration(r.Int63n(int64(5*time.Second))), []byte(fmt.Sprintf("order-%d", i)))
			}
		},
		Invariants: []WorkerInvariant{ExactlyOnceMessages("ship", func(b []byte) string { return string(b) })},
	}
}

// TestWorkerIdempotencyKeyShipsOnce: under crashes, shutdowns, network and service faults, the
// handler with a key ships each order once and every message is disposed.
func TestWorkerIdempotencyKeyShipsOnce(t *testing.T) {
	CheckWorker(t, shipping(true, ServiceFaults{Fail: 0.1, ApplyThenFail: 0.05, Timeout: 0.05}), Seeds(200))
}

// TestWorkerRedeliveryRepeatsTheEffect: without a key, a redelivery (a crash, a lost lease, a
// lost reply) ships twice, and the sweep finds it with the service never failing.
func TestWorkerRedeliveryRepeatsTheEffect(t *testing.T) {
	f, err := FindWorker(shipping(false, ServiceFaults{}), Seeds(300), TimelineDir(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Fatal("300 seeds found no double shipment")
	}
	if !strings.HasPrefix(f.Shrunk.Invariant, "exactly-once ship") {
		t.Fatalf("found %q:\n%s", f.Shrunk.Invariant, f)
	}
	if k := f.Shrunk.Knobs; k.Crashes == 0 && !k.DiskFaults {
		t.Fatalf("a double shipment with neither crashes nor network faults, yet the service never fails:\n%s", f)
	}
}

func TestWorkerSameSeedSameTimeline(t *testing.T) {
	sc := shipping(true, ServiceFaults{Fail: 0.2})
	sw := sc.sweep()
	for seed := int64(1); seed <= 20; seed++ {
		a, b := sw.run(seed, sw.knobs(seed)), sw.run(seed, sw.knobs(seed))
		if a.digest != b.digest {
			t.Fatalf("seed %d gave two timelines", seed)
		}
	}
}

// TestWorkerRedrivePolicyDeadLetters: with RedriveMax the simulated queue has the redrive
// policy, so a handler that always rejects to the DLQ ends with every message dead-lettered.
func TestWorkerRedrivePolicyDeadLetters(t *testing.T) {
	sc := WorkerScenario{
		Config: sluice.WorkerConfig{Window: 2 * time.Second, RedriveMax: 2},
		Setup: func(env *Env) sluice.WorkerHandler {
			return func(ctx context.Context, m sluice.Message) error {
				return sluice.DeadLetter(fmt.Errorf("cannot handle %s", m.Body))
			}
		},
		Workload: func(r *rand.Rand, p *Sends) { p.Send(0, []byte("a")) },
		StepsMax: 10_000,
		Invariants: []WorkerInvariant{{Name: "dead-lettered at the end", Check: func(v WorkerView) error {
			if !v.Final() {
				return nil
			}
			for _, m := range v.Messages() {
				if m.State != "dead-lettered" {
					return fmt.Errorf("message %s is %s", m.ID, m.State)
				}
			}
			return nil
		}}},
	}
	res := runWorker(&sc, 1, Knobs{Jobs: 1, Horizon: time.Second})
	if res.violation != nil {
		t.Fatalf("%v\n%s", res.violation, strings.Join(res.timeline, "\n"))
	}
}
