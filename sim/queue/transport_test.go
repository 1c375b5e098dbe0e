package queue

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/transporttest"
)

// TestTransportBehaviour runs the shared Transport suite against the simulated SQS in each of
// its modes. With stale deletes answered Gone it runs strict: where fauxqs is lenient the
// simulator answers as real SQS does.
func TestTransportBehaviour(t *testing.T) {
	modes := []struct {
		name   string
		lapsed Lapsed
		stale  StaleDelete
	}{
		{"lapsed=gone,stale-delete=gone", LapsedGone, StaleDeleteGone},
		{"lapsed=ignore,stale-delete=ignored", LapsedIgnore, StaleDeleteIgnored},
		{"lapsed=extend,stale-delete=gone", LapsedExtend, StaleDeleteGone},
	}
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			transporttest.Run(t, transporttest.Harness{
				Strict: mode.stale == StaleDeleteGone,
				New: func(t *testing.T, maxReceiveCount int) transporttest.Queue {
					now := Epoch
					clock := func() time.Time { return now }
					var dlq *Queue
					if maxReceiveCount > 0 {
						dlq = New(Config{Name: "dlq", Lapsed: mode.lapsed, StaleDelete: mode.stale}, nil)
					}
					q := New(Config{Name: "q", DeadLetter: dlq, MaxReceiveCount: maxReceiveCount,
						Lapsed: mode.lapsed, StaleDelete: mode.stale}, nil)
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
		})
	}
}
