package queue

import (
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// BenchmarkReceiveExtendDelete: one op is one message through receive (10 at a time), one
// extension and a delete, with a backlog of n live messages; the cost per op should grow as
// O(log n) (the heap), which the ratio against the 10-message backlog shows.
func BenchmarkReceiveExtendDelete(b *testing.B) {
	var base float64
	for _, n := range []int{10, 10_000, 100_000} {
		b.Run(fmt.Sprintf("backlog=%d", n), func(b *testing.B) {
			q := New(Config{}, nil)
			now := Epoch
			for range n {
				q.Send(now, []byte("m"))
			}
			b.ResetTimer()
			start := time.Now()
			for done := 0; done < b.N; {
				ms := q.Receive(now, core.BatchMax, 30*time.Second)
				for _, m := range ms {
					if err := q.ChangeVisibility(now, m.Receipt, time.Minute); err != nil {
						b.Fatal(err)
					}
					if err := q.Delete(now, m.Receipt); err != nil {
						b.Fatal(err)
					}
					q.Send(now, []byte("m")) // keep the backlog at n
				}
				done += len(ms)
				now = now.Add(time.Millisecond)
			}
			perOp := float64(time.Since(start).Nanoseconds()) / float64(b.N)
			if n == 10 {
				base = perOp
			}
			if base > 0 {
				b.ReportMetric(perOp/base, "x-backlog-10")
			}
		})
	}
}
