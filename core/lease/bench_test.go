package lease

import (
	"fmt"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
)

// heldMachine returns a machine holding n receipts whose stamps are spread over one renewal
// period, so renewals fall due at a steady rate, and the heap bytes the receipts cost.
func heldMachine(n int) (*Machine, float64) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("receipt-%09d", i)
	}
	msgs := make([]core.Message, n)
	for i := range msgs {
		msgs[i] = core.Message{ID: keys[i], Receipt: keys[i], ReceiveCount: 1}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := mustNew(Config{})
	spread := 10 * time.Second / time.Duration(n)
	for i := 0; i < n; i += core.BatchMax {
		at := epoch.Add(time.Duration(i) * spread)
		if err := m.Step(Received{Now: at, Stamp: at, Window: 30 * time.Second, Ceiling: benchCeiling,
			Messages: msgs[i:min(i+core.BatchMax, n)]}); err != nil {
			panic(err)
		}
		m.Ready()
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(msgs)
	return m, float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)
}

// renewSome drives m like a driver with instant replies until at least k renewal entries
// went out, and returns how many did.
func renewSome(m *Machine, k int) int {
	done := 0
	rd := m.Ready()
	for done < k {
		now := m.WakeAt()
		if now.IsZero() {
			panic("lease benchmark: no receipt left to renew")
		}
		if err := m.Step(Tick{Now: now}); err != nil {
			panic(err)
		}
		rd = m.Ready()
		for _, c := range rd.Changes {
			done += len(c.Entries)
			if err := m.Step(RenewResult{Call: c.Call, Now: now, Entries: make([]error, len(c.Entries))}); err != nil {
				panic(err)
			}
		}
		rd = m.Ready()
	}
	return done
}

var benchSizes = []int{10, 10_000, 100_000}

// benchCeiling is far enough that no receipt meets it however long a benchmark runs
// (a million renewal rounds of 10 s are under four months).
const benchCeiling = 10 * 365 * 24 * time.Hour

// BenchmarkLease measures one renewal action (a tick that sends due renewals, and their
// successful replies) at 10, 10,000 and 100,000 held receipts: ns per renewed receipt, that
// figure divided by log2(n), and heap bytes per held receipt.
func BenchmarkLease(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("receipts=%d", n), func(b *testing.B) {
			m, perReceipt := heldMachine(n)
			b.ResetTimer()
			done := 0
			for b.Loop() {
				done += renewSome(m, 1)
			}
			ns := float64(b.Elapsed().Nanoseconds()) / float64(done)
			b.ReportMetric(ns, "ns/renewal")
			b.ReportMetric(ns/math.Log2(float64(n)), "ns/renewal/log2n")
			b.ReportMetric(perReceipt, "B/receipt")
			if err := m.checkInvariants(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkLeaseGrowth measures the three sizes in one run, interleaved (1,000 renewals at
// each size per iteration), and prints the cost per renewal at each size, the ratio against
// n = 10, and beside it the ratio log2(n)/log2(10) that logarithmic growth allows, with the
// heap bytes each held receipt costs at each size.
func BenchmarkLeaseGrowth(b *testing.B) {
	var ms [3]*Machine
	var bytes [3]float64
	for i, n := range benchSizes {
		ms[i], bytes[i] = heldMachine(n)
	}
	var spent [3]time.Duration
	var done [3]int
	b.ResetTimer()
	for b.Loop() {
		for i := range ms {
			start := b.Elapsed()
			done[i] += renewSome(ms[i], 1000)
			spent[i] += b.Elapsed() - start
		}
	}
	var ns [3]float64
	for i, n := range benchSizes {
		ns[i] = float64(spent[i].Nanoseconds()) / float64(done[i])
		b.ReportMetric(ns[i], fmt.Sprintf("ns/renewal@%d", n))
		b.ReportMetric(bytes[i], fmt.Sprintf("B/receipt@%d", n))
	}
	for i, n := range benchSizes[1:] {
		b.ReportMetric(ns[i+1]/ns[0], fmt.Sprintf("x@%d", n))
		b.ReportMetric(math.Log2(float64(n))/math.Log2(10), fmt.Sprintf("logx@%d", n))
	}
}
