// Command flaky runs sluice queue workers against fauxqs through a seeded fault proxy (the
// network of the issue that asked for it: resets, answers lost after the call took effect,
// 2–8 s latency spikes) and prints what the queue saw: every message deleted or
// dead-lettered, no overlapping handler runs, no call outliving its lease, and duplicate
// successful runs per 100 messages by cause.
//
//	go run ./examples/sqsworker/cmd/flaky [-seed 1] [-messages 300] [-workers 3] [-window 6s] [-sdk-attempts 0]
//
// fauxqs must be installed (.ci/fauxqs.sh install). Exit status 1 when a check failed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/sluicehq/sluice/internal/fauxqs"
	"github.com/sluicehq/sluice/internal/flakyrun"
)

func main() {
	seed := flag.Int64("seed", 1, "seed of the fault proxy and of the message mix")
	messages := flag.Int("messages", 300, "messages to send")
	workers := flag.Int("workers", 3, "workers (each with its own SQS client)")
	window := flag.Duration("window", 6*time.Second, "visibility timeout (whole seconds)")
	deadline := flag.Duration("deadline", 3*time.Minute, "how long the queue may take to empty")
	attempts := flag.Int("sdk-attempts", 0, "the workers' SDK MaxAttempts (0: the SDK default; the adapter makes one attempt at calls naming a receipt anyway)")
	flag.Parse()
	server, err := fauxqs.New()
	if err != nil {
		fmt.Fprintf(os.Stderr, "flaky: cannot start fauxqs (install it with .ci/fauxqs.sh install): %v\n", err)
		os.Exit(2)
	}
	defer server.Stop()
	rep, err := flakyrun.Run(context.Background(), server, flakyrun.Options{
		Seed: *seed, Messages: *messages, Workers: *workers, Concurrency: 8, Window: *window,
		Deadline: *deadline, RedriveMax: 4, SDKAttempts: *attempts, Proxy: flakyrun.Profile(*seed),
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "flaky: %v\n", err)
		server.Stop()
		os.Exit(2)
	}
	fmt.Printf("flaky network: seed %d, %d workers, window %v, sdk attempts %d\n", *seed, *workers, *window, *attempts)
	rep.Write(os.Stdout)
	if len(rep.Problems) > 0 {
		server.Stop()
		os.Exit(1)
	}
}
