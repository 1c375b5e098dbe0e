package runner

import (
	"fmt"
	"log/slog"
	"math/rand"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
)

// machineWith returns a machine holding n waiting jobs (due in an hour) and up to capacity
// running ones, all synced.
func machineWith(n, capacity int) *Machine {
	m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: capacity,
		RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1))})
	for i := 0; i < capacity; i++ {
		m.Step(Enqueue{Due: epoch, Target: "a"})
	}
	m.Step(Tick{Now: epoch, Admit: true})
	for i := 0; i < n; i++ {
		m.Step(Enqueue{Due: epoch.Add(time.Hour + time.Duration(i)), Target: "a"})
	}
	m.Step(Synced{Through: m.seq})
	m.Ready()
	return m
}

// cancelAndComplete is one cancel of a waiting job plus one completed attempt followed by the
// start of the next due job: the per-job work of a busy runner.
func cancelAndComplete(b *testing.B, n int) {
	const capacity = 64
	m := machineWith(n, capacity)
	now := epoch
	next := uint64(capacity + 1)
	running := make([]Token, 0, capacity)
	for id := uint64(1); id <= capacity; id++ {
		running = append(running, Token{id, 1})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := m.Step(Cancel{ID: next}); err != nil {
			b.Fatal(err)
		}
		next++
		tok := running[0]
		running = running[1:]
		m.Step(AttemptDone{Now: now, Token: tok, Outcome: Success()})
		m.Step(Enqueue{Due: now, Target: "a"}) // keep the queue's size steady
		m.Step(Tick{Now: now, Admit: true})
		m.Step(Synced{Through: m.seq})
		for _, a := range m.Ready().Starts {
			running = append(running, a.Token)
		}
		if next > uint64(capacity+n) { // keep cancelling only the jobs due in an hour
			b.StopTimer()
			m = machineWith(n, capacity)
			next, running = uint64(capacity+1), running[:0]
			for id := uint64(1); id <= capacity; id++ {
				running = append(running, Token{id, 1})
			}
			b.StartTimer()
		}
	}
}

// BenchmarkCancelAndComplete shows cancel and complete do not scan the pending or running
// jobs: the cost at 100,000 pending jobs over the cost at 1,000 is reported as ratio_100k_1k
// (O(log n): close to 1; a scan would be ~100).
func BenchmarkCancelAndComplete(b *testing.B) {
	var base float64
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("pending=%d", n), func(b *testing.B) {
			cancelAndComplete(b, n)
			per := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if n == 1_000 {
				base = per
			} else if base > 0 {
				b.ReportMetric(per/base, "ratio_100k_1k")
			}
		})
	}
}

// BenchmarkEnqueueUnique measures one enqueue with a unique key and its sync, on a machine
// holding 10^6 waiting jobs that each hold a unique key, or 10^6 keys in windows after
// success, against one holding 10^6 waiting jobs without keys: the index and the windows are
// maps, so the ratios should stay near 1.
func BenchmarkEnqueueUnique(b *testing.B) {
	const live = 1_000_000
	per := map[string]float64{}
	for _, held := range []string{"none", "live-keys", "windows"} {
		b.Run("held="+held, func(b *testing.B) {
			m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 1,
				RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1))})
			for i := range live {
				o := Opts{}
				if held == "live-keys" {
					o.Unique = fmt.Sprintf("live-%d", i)
				}
				m.Step(Enqueue{Due: epoch.Add(time.Hour), Target: "a", Opts: o})
			}
			if held == "windows" {
				// 10^6 keys reserved after success (their jobs pruned, as after compaction).
				for i := range live {
					m.windows[uniqueKey(&Opts{Unique: fmt.Sprintf("won-%d", i)})] = window{id: 1, until: epoch.Add(24 * time.Hour)}
				}
			}
			m.Step(Synced{Through: m.seq})
			m.Ready()
			keys := make([]string, b.N)
			for i := range keys {
				keys[i] = fmt.Sprintf("new-%d", i)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := m.Step(Enqueue{Due: epoch.Add(time.Hour), Target: "a", Opts: Opts{Unique: keys[i]}}); err != nil {
					b.Fatal(err)
				}
				m.Step(Synced{Through: m.seq})
				m.Ready()
			}
			per[held] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if per["none"] > 0 && held != "none" {
				b.ReportMetric(per[held]/per["none"], "ratio_to_none")
			}
		})
	}
}

// BenchmarkList100 measures one List page of 100 jobs from a machine holding 10^6 jobs: from
// the middle of the id range with no filter, and with a filter that matches 1 job in 100
// (target "rare"), which scans 10,000 ids for the page.
func BenchmarkList100(b *testing.B) {
	const n = 1_000_000
	m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 1,
		RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1))})
	for i := range n {
		target := "a"
		if i%100 == 0 {
			target = "rare"
		}
		m.Step(Enqueue{Due: epoch.Add(time.Hour), Target: target, Payload: []byte("0123456789abcdef")})
	}
	m.Step(Synced{Through: m.seq})
	m.Ready()
	all := func(*Job) bool { return true }
	rare := func(j *Job) bool { return j.Target == "rare" }
	for _, c := range []struct {
		name  string
		match func(*Job) bool
	}{{"all", all}, {"1-in-100", rare}} {
		b.Run(c.name, func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				from := uint64(1 + (i*7919)%(n/2))
				jobs, _, _ := m.List(from, n, c.match, 100, 100_000)
				if len(jobs) != 100 {
					b.Fatalf("page of %d", len(jobs))
				}
			}
		})
	}
}

// BenchmarkScheduleKinds measures one start and one outcome (each with its sync) with 10^5
// due jobs spread over 1 or 8 kinds, 2 of them limited: picking across kinds is O(kinds) per
// start, so 8 kinds should cost little more than 1.
func BenchmarkScheduleKinds(b *testing.B) {
	const due = 100_000
	per := map[int]float64{}
	for _, kinds := range []int{1, 8} {
		b.Run(fmt.Sprintf("kinds=%d", kinds), func(b *testing.B) {
			var ks []KindConfig
			for k := range kinds {
				ks = append(ks, KindConfig{Name: fmt.Sprintf("k%d", k), Limit: min(k, 2)})
			}
			m := mustMachine(MachineConfig{Policy: retry.DefaultPolicy(), Circuit: breaker.DefaultCircuit(), Capacity: 4,
				RecordMax: 1 << 20, Logger: slog.New(slog.DiscardHandler), Rand: rand.New(rand.NewSource(1)),
				Kinds: ks, KindsOnly: true})
			enq := func(i int) {
				m.Step(Enqueue{Now: epoch, Due: epoch, Target: "a", Opts: Opts{Kind: ks[i%kinds].Name, Priority: i % 7}})
			}
			for i := range due {
				enq(i)
			}
			m.Step(Synced{Through: m.seq})
			m.Ready()
			now := epoch
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				now = now.Add(time.Millisecond)
				m.Step(Tick{Now: now, Admit: true})
				m.Step(Synced{Through: m.seq})
				rd := m.Ready()
				if len(rd.Starts) == 0 {
					b.Fatal("nothing started")
				}
				for _, a := range rd.Starts {
					m.Step(AttemptDone{Now: now, Token: a.Token, Outcome: Success()})
					enq(i)
				}
				m.Step(Synced{Through: m.seq})
				m.Ready()
			}
			per[kinds] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			if per[1] > 0 && kinds > 1 {
				b.ReportMetric(per[kinds]/per[1], "ratio_to_1_kind")
			}
		})
	}
}
