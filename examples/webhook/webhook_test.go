package webhook

import (
	"context"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluicetest"
)

// simReceiver is the test's Receiver: the same handler code, over a simulated service.
type simReceiver struct{ svc *sluicetest.Service }

func (s simReceiver) Post(ctx context.Context, order, body, idempotencyKey string) error {
	_, err := s.svc.Do(ctx, sluicetest.Request{Op: "post", Key: order, Value: body, IdempotencyKey: idempotencyKey})
	return err
}

// flaky is the receiver's fault model: some failures, some deliveries applied and then
// answered with an error, some timeouts.
var flaky = sluicetest.ServiceFaults{Fail: 0.05, ApplyThenFail: 0.02, Timeout: 0.02, TimeoutAfter: 2 * time.Second}

// README:begin
// scenario runs handler h with this program's configuration against a receiver with faults f:
// a few orders paid over ten seconds, some cancelled, and the invariant that each order's
// webhook took effect once.
func scenario(h func(Receiver) sluice.Handler[Delivery], f sluicetest.ServiceFaults) sluicetest.Scenario[Delivery] {
	return sluicetest.Scenario[Delivery]{
		Config: sluice.Config{Capacity: 4, Policy: sluice.Policy{Attempts: 10, Base: 200 * time.Millisecond, Cap: 5 * time.Second}},
		Setup: func(env *sluicetest.Env) sluice.Handler[Delivery] {
			return h(simReceiver{env.Service("receiver", f)})
		},
		Workload: func(r *rand.Rand, p *sluicetest.Plan[Delivery]) {
			for i := range 1 + r.Intn(8) {
				at := time.Duration(r.Int63n(int64(10 * time.Second)))
				j := p.Enqueue(at, "hooks.example.com", Delivery{Order: fmt.Sprintf("order-%d", i), Event: "order.paid"})
				if r.Intn(8) == 0 {
					p.Cancel(at+time.Duration(r.Int63n(int64(time.Second))), j)
				}
			}
		},
		Invariants: []sluicetest.Invariant[Delivery]{
			sluicetest.ExactlyOnce("receiver", func(d Delivery) string { return d.Order }),
		},
	}
}

// TestHandlerDeliversEachEventOnce sweeps 500 seeds of crashes, graceful stops, disk and
// receiver faults over the fixed handler.
func TestHandlerDeliversEachEventOnce(t *testing.T) {
	sluicetest.Check(t, scenario(Handler, flaky), sluicetest.Seeds(500), sluicetest.Corpus("testdata/sluicetest.corpus"))
}

// README:end

// TestNaiveHandlerDoubleDeliveryIsFound keeps the bug as a test: the sweep must find the
// double delivery of the handler without an idempotency key.
func TestNaiveHandlerDoubleDeliveryIsFound(t *testing.T) {
	f, err := sluicetest.Find(scenario(NaiveHandler, flaky), sluicetest.Seeds(300))
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Fatal("300 seeds did not find the naive handler's double delivery")
	}
	if want := "exactly-once receiver effect per key"; f.Shrunk.Invariant != want {
		t.Fatalf("found %q, want %q:\n%s", f.Shrunk.Invariant, want, f)
	}
	t.Logf("found at seed %d, as expected:\n%s", f.Found.Seed, f)
}

// TestNaiveHandlerDoubleDeliveryIsFoundWithAReliableReceiver: even a receiver that never fails
// gets the naive handler's delivery twice, when the process crashes (or a failed fsync
// poisons the runner, which then restarts) between the POST and the journaled success; the
// shrunk run must contain one of them.
func TestNaiveHandlerDoubleDeliveryIsFoundWithAReliableReceiver(t *testing.T) {
	f, err := sluicetest.Find(scenario(NaiveHandler, sluicetest.ServiceFaults{}), sluicetest.Seeds(300))
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Fatal("300 seeds did not find the double delivery a crash causes")
	}
	if k := f.Shrunk.Knobs; k.Crashes == 0 && !k.DiskFaults {
		t.Fatalf("the shrunk run has neither crashes nor disk faults, yet the receiver never fails:\n%s", f)
	}
	t.Logf("found at seed %d, as expected:\n%s", f.Found.Seed, f)
}

// BenchmarkSweep500 measures a user-side sweep: 500 seeds of the fixed handler.
func BenchmarkSweep500(b *testing.B) {
	for b.Loop() {
		f, err := sluicetest.Find(scenario(Handler, flaky), sluicetest.Seeds(500), sluicetest.NoDeterminismCheck())
		if err != nil || f != nil {
			b.Fatal(err, f)
		}
	}
}
