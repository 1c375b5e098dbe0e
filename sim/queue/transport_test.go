package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/transporttest"
)

// TestTransportBehaviour runs the shared Transport suite against the simulated SQS, strict:
// where fauxqs is lenient the simulator answers as real SQS does.
func TestTransportBehaviour(t *testing.T) {
	transporttest.Run(t, transporttest.Harness{
		Strict: true,
		New: func(t *testing.T, maxReceiveCount int) transporttest.Queue {
			now := Epoch
			clock := func() time.Time { return now }
			var dlq *Queue
			if maxReceiveCount > 0 {
				dlq = New(Config{Name: "dlq"}, nil)
			}
			q := New(Config{Name: "q", DeadLetter: dlq, MaxReceiveCount: maxReceiveCount}, nil)
			tq := transporttest.Queue{
				Transport: q.Transport(clock),
				Send:      func(t *testing.T, body string) string { return q.Send(now, []byte(body)) },
				Wait:      func(d time.Duration) { now = now.Add(d) },
				Check: func() error {
					if dlq != nil {
						return errors.Join(q.CheckInvariants(), dlq.CheckInvariants())
					}
					return q.CheckInvariants()
				},
			}
			if dlq != nil {
				tq.DeadLetter = dlq.Transport(clock)
			}
			return tq
		},
	})
}
