package sqs_test

import (
	"context"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/internal/fauxqs"
	"github.com/sluicehq/sluice/internal/transporttest"
)

var queueSeq atomic.Int64

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_-]+`)

// queueName makes a unique, valid queue name from the test's name.
func queueName(t testing.TB) string {
	name := unsafeName.ReplaceAllString(t.Name(), "-")
	if len(name) > 60 {
		name = name[len(name)-60:]
	}
	return fmt.Sprintf("q%d-%s", queueSeq.Add(1), name)
}

func newClient(t testing.TB, s *fauxqs.Server) *awssqs.Client {
	t.Helper()
	c, err := sqs.NewClient(context.Background(), sqs.ClientOptions{Endpoint: s.URL, MaxAttempts: 1, Load: s.LoadOptions()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTransport(t testing.TB, c *awssqs.Client, url string) *sqs.Transport {
	t.Helper()
	tr, err := sqs.New(c, sqs.Config{QueueURL: url, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func newSender(t testing.TB, c *awssqs.Client, url string) *sqs.Sender {
	t.Helper()
	snd, err := sqs.NewSender(c, sqs.Config{QueueURL: url, CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return snd
}

// newQueue starts fauxqs and creates a queue named after the test on it.
func newQueue(t testing.TB) (*fauxqs.Server, *awssqs.Client, string) {
	t.Helper()
	s := fauxqs.Start(t)
	c := newClient(t, s)
	url, err := sqs.CreateQueue(context.Background(), c, queueName(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, c, url
}

// TestTransportBehaviourOnFauxqs runs the shared Transport suite through the adapter against
// fauxqs over HTTP (lenient where fauxqs is, see COMPONENTS.md).
func TestTransportBehaviourOnFauxqs(t *testing.T) {
	s := fauxqs.Start(t)
	c := newClient(t, s)
	ctx := context.Background()
	transporttest.Run(t, transporttest.Harness{
		Parallel: true,
		Scale:    2, // real sleeps on a shared machine: 2 s windows, 1 s margins
		New: func(t *testing.T, maxReceiveCount int) transporttest.Queue {
			var q transporttest.Queue
			name := queueName(t)
			if maxReceiveCount > 0 {
				url, dlqURL, err := sqs.CreateQueueWithDeadLetter(ctx, c, name, maxReceiveCount, nil)
				if err != nil {
					t.Fatal(err)
				}
				q.Transport = newTransport(t, c, url)
				q.DeadLetter = newTransport(t, c, dlqURL)
			} else {
				url, err := sqs.CreateQueue(ctx, c, name, nil)
				if err != nil {
					t.Fatal(err)
				}
				q.Transport = newTransport(t, c, url)
			}
			url := q.Transport.(*sqs.Transport).QueueURL()
			q.Send = func(t *testing.T, body string) string {
				id, err := sqs.Send(ctx, c, url, body)
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			q.Wait = time.Sleep
			return q
		},
	})
}
