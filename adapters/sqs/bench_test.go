package sqs_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

// fill sends n messages in batches of 10 (untimed setup).
func fill(b *testing.B, c *awssqs.Client, url string, n int) {
	b.Helper()
	for sent := 0; sent < n; {
		k := min(core.BatchMax, n-sent)
		entries := make([]types.SendMessageBatchRequestEntry, k)
		for i := range entries {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String("payload-" + strconv.Itoa(sent+i))}
		}
		out, err := c.SendMessageBatch(context.Background(), &awssqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		if err != nil || len(out.Failed) > 0 {
			b.Fatalf("send batch: %v (%d failed)", err, len(out.Failed))
		}
		sent += k
	}
}

// drain receives n messages, runs a no-op handler on each and deletes them one call per
// message (batch false) or one DeleteMessageBatch per receive (batch true).
func drain(b *testing.B, tr *sqs.Transport, n int, batch bool) time.Duration {
	b.Helper()
	handler := func(core.Message) error { return nil }
	start := time.Now()
	for done := 0; done < n; {
		ms, err := tr.Receive(context.Background(), core.BatchMax, time.Second, 30*time.Second)
		if err != nil {
			b.Fatalf("receive: %v", err)
		}
		if len(ms) == 0 {
			b.Fatalf("queue ran dry after %d of %d messages", done, n)
		}
		receipts := make([]string, 0, len(ms))
		for _, m := range ms {
			if err := handler(m); err != nil {
				b.Fatal(err)
			}
			receipts = append(receipts, m.Receipt)
		}
		if batch {
			errs, err := tr.DeleteBatch(context.Background(), receipts)
			if err != nil {
				b.Fatalf("delete batch: %v", err)
			}
			for _, err := range errs {
				if err != nil {
					b.Fatalf("delete batch entry: %v", err)
				}
			}
		} else {
			for _, r := range receipts {
				if err := tr.Delete(context.Background(), r); err != nil {
					b.Fatalf("delete: %v", err)
				}
			}
		}
		done += len(ms)
	}
	return time.Since(start)
}

// BenchmarkAdapterReceiveDelete measures messages per second through the adapter against
// fauxqs: receive (10 at a time) -> no-op handler -> delete, with one DeleteMessage per
// message (the baseline) and with one DeleteMessageBatch per receive, in the same run.
// One op is one message through each pipeline.
func BenchmarkAdapterReceiveDelete(b *testing.B) {
	s := fauxqs.Start(b)
	c := newClient(b, s)
	single, batch := queueName(b)+"-single", queueName(b)+"-batch"
	var urls [2]string
	for i, name := range []string{single, batch} {
		var err error
		if urls[i], err = sqs.CreateQueue(context.Background(), c, name, nil); err != nil {
			b.Fatal(err)
		}
	}
	trSingle := newTransport(b, c, urls[0])
	trBatch := newTransport(b, c, urls[1])
	fill(b, c, urls[0], b.N)
	fill(b, c, urls[1], b.N)
	b.ResetTimer()
	dSingle := drain(b, trSingle, b.N, false)
	dBatch := drain(b, trBatch, b.N, true)
	b.StopTimer()
	singleRate := float64(b.N) / dSingle.Seconds()
	batchRate := float64(b.N) / dBatch.Seconds()
	b.ReportMetric(singleRate, "msgs/s-single-delete")
	b.ReportMetric(batchRate, "msgs/s-batch-delete")
	b.ReportMetric(batchRate/singleRate, "batch/single")
}
