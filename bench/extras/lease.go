package extras

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// leaseRig drives one lease.Machine on simulated time, answering every call
// with success at once, and counts what it answered.
type leaseRig struct {
	m       *lease.Machine
	renewed int
	deleted int
}

// pump performs the machine's effects at now until it has none left.
func (r *leaseRig) pump(now time.Time) (wake time.Time, err error) {
	for {
		rd := r.m.Ready()
		if len(rd.Cancel) > 0 {
			return wake, fmt.Errorf("lease: %d receipts dropped (first: %s, %s)", len(rd.Cancel), rd.Cancel[0].Receipt, rd.Cancel[0].Reason)
		}
		if len(rd.Changes) == 0 && len(rd.Deletes) == 0 {
			return r.m.WakeAt(), nil
		}
		for _, c := range rd.Changes {
			ev := lease.RenewResult{Call: c.Call, Now: now, Entries: make([]error, len(c.Entries))}
			if c.Purpose == lease.Disposal {
				if err := r.m.Step(lease.DisposeResult{Call: c.Call, Now: now, Entries: ev.Entries}); err != nil {
					return wake, err
				}
				continue
			}
			r.renewed += len(c.Entries)
			if err := r.m.Step(ev); err != nil {
				return wake, err
			}
		}
		for _, d := range rd.Deletes {
			r.deleted += len(d.Receipts)
			if err := r.m.Step(lease.DisposeResult{Call: d.Call, Now: now, Entries: make([]error, len(d.Receipts))}); err != nil {
				return wake, err
			}
		}
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// LeaseCost holds n receipts in one lease.Machine (window 30 s, ceiling 12 h,
// receipts arriving in batches of 10 spread over 9 s of simulated time), then
// runs at least 30 simulated seconds and 30,000 renewals (each answered with
// success) and acks every receipt. It reports wall time per action.
func LeaseCost(sizes []int) (Table, error) {
	t := Table{
		Title: "lease controller (core/lease.Machine on simulated time; every call answered with success at once)",
		Rows:  []Row{{"receipts", "heap B/receipt", "receive ns/receipt", "renewals", "ns/renewal", "ack ns/receipt", "ns/renewal ÷ log2(n)"}},
	}
	const window = 30 * time.Second
	for _, n := range sizes {
		before := heapAlloc()
		m, err := lease.New(lease.Config{ReceiptsMax: n})
		if err != nil {
			return t, err
		}
		rig := &leaseRig{m: m}
		batches := (n + 9) / 10
		spread := 9 * time.Second
		t0 := time.Now()
		now := epoch
		for b := 0; b < batches; b++ {
			now = epoch.Add(time.Duration(int64(spread) * int64(b) / int64(batches)))
			msgs := make([]core.Message, 0, 10)
			for i := b * 10; i < min(n, b*10+10); i++ {
				id := fmt.Sprintf("m%d", i)
				msgs = append(msgs, core.Message{ID: id, Receipt: "r" + id, ReceiveCount: 1})
			}
			if err := rig.m.Step(lease.Received{Now: now, Stamp: now, Window: window, Ceiling: 12 * time.Hour, Messages: msgs}); err != nil {
				return t, err
			}
			if _, err := rig.pump(now); err != nil {
				return t, err
			}
		}
		recv := time.Since(t0)
		held := heapAlloc()
		renewedBefore := rig.renewed

		// Renewals: follow the machine's timer for at least 30 simulated
		// seconds and 30,000 renewals (small n), staying clear of the ceiling.
		end := now.Add(window)
		limit := epoch.Add(11 * time.Hour)
		t1 := time.Now()
		rig.m.Ready()
		wake := rig.m.WakeAt()
		for !wake.IsZero() && (wake.Before(end) || rig.renewed-renewedBefore < 30_000) && wake.Before(limit) {
			now = wake
			if err := rig.m.Step(lease.Tick{Now: now}); err != nil {
				return t, err
			}
			var err error
			if wake, err = rig.pump(now); err != nil {
				return t, err
			}
		}
		renewDur := time.Since(t1)
		renewals := rig.renewed - renewedBefore

		// Dispositions: ack every receipt.
		t2 := time.Now()
		for i := 0; i < n; i++ {
			if err := rig.m.Step(lease.Dispose{Now: now, Receipt: fmt.Sprintf("rm%d", i), Disposition: lease.Disposition{Kind: lease.Ack}}); err != nil {
				return t, err
			}
			if i%10 == 9 || i == n-1 {
				if _, err := rig.pump(now); err != nil {
					return t, err
				}
			}
		}
		ackDur := time.Since(t2)
		if rig.deleted != n {
			return t, fmt.Errorf("lease: %d receipts, %d deletes", n, rig.deleted)
		}
		if renewals == 0 {
			return t, fmt.Errorf("lease: no renewals in 30 simulated seconds with %d receipts", n)
		}
		perRenew := float64(renewDur.Nanoseconds()) / float64(renewals)
		perReceipt := "-"
		if n >= 1000 {
			perReceipt = fmt.Sprintf("%.0f", float64(int64(held)-int64(before))/float64(n))
		}
		t.Rows = append(t.Rows, Row{
			fmt.Sprint(n),
			perReceipt,
			fmt.Sprintf("%.0f", float64(recv.Nanoseconds())/float64(n)),
			fmt.Sprint(renewals),
			fmt.Sprintf("%.0f", perRenew),
			fmt.Sprintf("%.0f", float64(ackDur.Nanoseconds())/float64(n)),
			fmt.Sprintf("%.0f", perRenew/math.Max(1, math.Log2(float64(n)))),
		})
		runtime.KeepAlive(rig)
	}
	t.Notes = append(t.Notes, "Renewals run for at least 30 simulated seconds and 30,000 renewals; O(log n) per action shows as a last column that does not grow.",
		"heap B/receipt is the live heap after receiving divided by n (not shown below 1,000 receipts, where it is noise).")
	return t, nil
}
