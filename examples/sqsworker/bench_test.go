package main

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core"
)

func fill(b *testing.B, e *env, n int) {
	b.Helper()
	for sent := 0; sent < n; {
		k := min(core.BatchMax, n-sent)
		entries := make([]types.SendMessageBatchRequestEntry, k)
		for i := range entries {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String("m")}
		}
		out, err := e.client.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(e.url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			b.Fatalf("send batch: %v", err)
		}
		sent += k
	}
}

// BenchmarkWorkerOnFauxqs: messages per second through a sluice Worker (lease controller,
// 10 handlers, batched deletes) over adapters/sqs against fauxqs, no-op handler, against a
// baseline in the same run: a bare loop over the same adapter (receive 10, DeleteMessageBatch)
// with no leases. One op is one message through each.
func BenchmarkWorkerOnFauxqs(b *testing.B) {
	base := newEnv(b, 0)
	fill(b, base, b.N)
	e := newEnv(b, 0)
	fill(b, e, b.N)
	b.ResetTimer()

	start := time.Now()
	tr := base.transport(base.url)
	for done := 0; done < b.N; {
		ms, err := tr.Receive(context.Background(), core.BatchMax, time.Second, 30*time.Second)
		if err != nil || len(ms) == 0 {
			b.Fatalf("baseline receive: %d messages, %v", len(ms), err)
		}
		receipts := make([]string, len(ms))
		for i, m := range ms {
			receipts[i] = m.Receipt
		}
		if _, err := tr.DeleteBatch(context.Background(), receipts); err != nil {
			b.Fatalf("baseline delete: %v", err)
		}
		done += len(ms)
	}
	baseline := time.Since(start)

	start = time.Now()
	w, err := sluice.NewWorker(e.transport(e.url), sluice.WorkerConfig{Window: 30 * time.Second, Wait: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		func(context.Context, sluice.Message) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	for w.Stats().Succeeded < b.N {
		time.Sleep(time.Millisecond)
	}
	worked := time.Since(start)
	cancel()
	if err := <-done; err != nil {
		b.Fatalf("worker: %v", err)
	}
	b.StopTimer()
	wr, br := float64(b.N)/worked.Seconds(), float64(b.N)/baseline.Seconds()
	b.ReportMetric(wr, "msgs/s-worker")
	b.ReportMetric(br, "msgs/s-bare-loop")
	b.ReportMetric(wr/br, "worker/bare")
}
