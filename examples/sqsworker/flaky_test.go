package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/fauxqs"
	"github.com/sluicehq/sluice/internal/flakyrun"
)

// TestFlakyNetworkKeepsEveryPromise: three workers (goroutines, each with its own SQS client)
// work 40 messages of mixed handler durations and failures through the seeded fault proxy
// (resets before and after the call takes effect, truncated answers, stalls, 5xx,
// throttling, latency spikes) against fauxqs. From the queue's side: every message is
// deleted or dead-lettered, no two handler runs of one message overlap, and no call names a
// receipt after its message was handed out again or deleted. The long version with figures
// is go run ./examples/sqsworker/cmd/flaky.
func TestFlakyNetworkKeepsEveryPromise(t *testing.T) {
	t.Parallel()
	if os.Getenv(fauxqs.EnvDisable) == "1" {
		t.Skipf("fauxqs: skipped because %s=1 (this test needs the fauxqs SQS server)", fauxqs.EnvDisable)
	}
	serverOnce.Do(func() { server, serverErr = fauxqs.New() })
	if serverErr != nil {
		t.Fatalf("fauxqs: cannot start the SQS test server (set %s=1 to skip tests that need it): %v", fauxqs.EnvDisable, serverErr)
	}
	px := flakyrun.Profile(7)
	px.SpikeMin, px.SpikeMax = time.Second, 4*time.Second
	px.ResetBefore, px.ResetAfter = 0.08, 0.05 // a harsher mix, so a short run meets every fault
	rep, err := flakyrun.Run(context.Background(), server, flakyrun.Options{
		Seed: 7, Messages: 40, Workers: 3, Concurrency: 6, Window: 4 * time.Second,
		Deadline: 45 * time.Second, RedriveMax: 3, Proxy: px, // ends as soon as the queue is empty; the bound is for a loaded machine
	})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	rep.Write(&b)
	t.Log("\n" + b.String())
	if len(rep.Problems) > 0 {
		t.Fatalf("the flaky network broke a promise:\n%s", b.String())
	}
	if rep.Calls == 0 || len(rep.Faults) == 0 {
		t.Fatalf("the proxy saw %d calls and injected %v: the test exercised nothing", rep.Calls, rep.Faults)
	}
}
