package sim

import (
	"bytes"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/sim/queue"
)

// The fleet's invariants (profile fleet).
const (
	// InvFleetTerminal: every job a producer sent ends done (its handler succeeded) or
	// dead-lettered with an error.
	InvFleetTerminal = "fleet-terminal"
	// InvFleetAttempts: no attempt is numbered past the job's budget, and the attempts a job
	// ran exceed the budget by no more than the crashes, lost leases and duplicates explain;
	// a job whose every delivery is lost (it kills its process) ends dead-lettered
	// deliveries-lost (or past its deadline) with no attempt spent.
	InvFleetAttempts = "fleet-attempts"
	// InvFleetBreaker: a process starts no attempt on a target whose breaker there is open.
	InvFleetBreaker = "fleet-breaker"
	// InvFleetSingleHolder: no attempt of a job starts while another process runs one under a
	// lease it still holds.
	InvFleetSingleHolder = "fleet-single-holder"
	// InvFleetNotJob: a message whose job attributes are damaged is refused by Decode with
	// ErrEnvelope naming the damaged attribute, never runs, and goes to the dead-letter
	// queue as it is; a well-formed one is never refused.
	InvFleetNotJob = "fleet-not-job"
	// InvFleetResends: every send toward a not-before time is delayed min(DelayMax, the time
	// left), rounded up to whole seconds, and a job waiting for a time T ahead is sent at most
	// ceil(T/DelayMax) times without a handler run (a parked job included: its due may be in
	// year 9999).
	InvFleetResends = "fleet-resends"
	// InvFleetAbandon: an attempt whose handler was cancelled (lease lost, stopping) and did
	// not succeed is abandoned: released, its probe given back, nothing recorded or sent; the
	// outcome of every other attempt is what ends its delivery.
	InvFleetAbandon = "fleet-abandon"
	// InvFleetStop: a graceful stop spends no attempt: the run after an attempt a stop
	// cancelled carries that attempt's number again.
	InvFleetStop = "fleet-stop"
	// InvFleetDeadLetter: a dead letter carries the job's body unchanged, every attribute of
	// other producers its message came with (type and value), and the error of its last
	// reported attempt; a message that is not a job goes as it came, Binary attributes kept.
	InvFleetDeadLetter = "fleet-dead-letter"
	// InvFleetOneJob: a job id enqueued once runs as one job: once a delivery of its main
	// lineage succeeded, no other message of it runs (a duplicate a crash, a lost lease or a
	// send's lost answer explains excepted), unless its enqueue was reported ambiguous.
	InvFleetOneJob = "fleet-one-job"
	// InvFleetSendBackoff: a message whose successor's send fails again and again is hidden
	// ever longer (the k-th time at least min(2^(k-1) s, 15 min)), never retried every second.
	InvFleetSendBackoff = "fleet-send-backoff"
)

// leaseHeld reports whether worker q holds receipt r by its own accounting now: it knows the
// receipt and the window it was last granted has not ended. A late timer (the process
// stalled) can leave a lapsed lease unstepped; the queue may then redeliver its message, as it
// would to a process paused past its lease, and that run is not two holders.
func (f *fleet) leaseHeld(q *workerProc, r string) bool {
	l, held := q.e.Lease(r)
	return held && l.Deadline.After(q.w.now())
}

// checkRun checks an attempt the job layer of worker p admitted, before it starts.
func (f *fleet) checkRun(p *workerProc, fp *fleetProc, j *fleetJob, a qjobs.Attrs, attempt int, m core.Message, dup bool) {
	w := p.w
	j.runs++
	if j.malformed != "" {
		w.chk.Fail(InvFleetNotJob, "%s: job-%d runs though its message is malformed (%s)", p.name, j.n, j.malformed)
		return
	}
	if j.parked {
		w.chk.Fail(InvFleetResends, "%s: job-%d runs, though it is due at %v", p.name, j.n, j.due)
		return
	}
	budget := f.policy.Attempts
	if a.AttemptsMax > 0 {
		budget = a.AttemptsMax
	}
	// Sorted: the first offender found is the one reported.
	rs := make([]string, 0, len(j.holders))
	for r := range j.holders {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	for _, r := range rs {
		h := j.holders[r]
		q := w.workers[h.worker-1]
		if !q.up || q.e == nil {
			continue
		}
		if dup || f.ended[h.msg] || f.dup[h.msg] {
			// A message whose successor was sent (or whose job ended) came back because its
			// delete was lost: the at-least-once duplicate a crash or lost lease explains.
			w.st.Jobs.Add("fleet-duplicate-run", 1)
			continue
		}
		if f.leaseHeld(q, r) {
			w.chk.Fail(InvFleetSingleHolder, "%s: job-%d started under %s while worker/%d runs it under %s, lease held", p.name, j.n, m.Receipt, h.worker, r)
			return
		}
	}
	w.chk.Pass(InvFleetSingleHolder)
	if j.succeeded && !dup && !j.ambiguous {
		w.chk.Fail(InvFleetOneJob, "%s: job-%d runs from %s after it succeeded, its enqueue never reported ambiguous", p.name, j.n, m.ID)
		return
	}
	w.chk.Pass(InvFleetOneJob)
	if stopped, ok := j.stopAttempt[m.ID]; ok && !dup {
		if attempt != stopped {
			w.chk.Fail(InvFleetStop, "%s: job-%d runs attempt %d from %s after a graceful stop cancelled its attempt %d", p.name, j.n, attempt, m.ID, stopped)
			return
		}
		delete(j.stopAttempt, m.ID)
		w.chk.Pass(InvFleetStop)
	}
	// Attempts still running under a lease already lost (their handler not yet returned) are
	// explained too: the queue redelivers their message.
	explained := j.explained
	for r, h := range j.holders {
		if q := w.workers[h.worker-1]; !q.up || q.e == nil {
			explained++
		} else if !f.leaseHeld(q, r) {
			explained++
		}
	}
	if attempt > budget || j.runs > budget+explained {
		w.chk.Fail(InvFleetAttempts, "job-%d: attempt %d started (%d runs, %d explained), budget %d", j.n, attempt, j.runs, explained, budget)
	} else {
		w.chk.Pass(InvFleetAttempts)
	}
	if st := fp.m.Breaker(a.Target); st.State == breaker.Open {
		w.chk.Fail(InvFleetBreaker, "%s: job-%d started on %s with its breaker open until %v", p.name, j.n, a.Target, st.Until)
	} else {
		w.chk.Pass(InvFleetBreaker)
	}
	if err := fp.m.CheckInvariants(); err != nil {
		w.chk.Fail(InvMachine, "%s: %v", p.name, err)
	}
}

// checkDeadLetter checks a job's dead letter as sent (out): its body, the other producers'
// attributes, and its last error.
func (f *fleet) checkDeadLetter(p *workerProc, j *fleetJob, s qjobs.Send, out core.Outgoing) {
	w := p.w
	if !f.checkKept(p, j, out) {
		return
	}
	a := s.Attrs
	last := strings.TrimSuffix(a.LastErr, "…(cut)")
	ok := a.LastErr != ""
	if errs := j.errs[a.Attempts]; a.Attempts > 0 && ok {
		ok = false
		for _, e := range errs {
			ok = ok || strings.HasPrefix(e, last)
		}
	}
	if !ok {
		w.chk.Fail(InvFleetDeadLetter, "%s: job-%d dead (%s) after %d attempts with error %q, its attempt %d reported %q",
			p.name, j.n, a.Reason, a.Attempts, a.LastErr, a.Attempts, j.errs[a.Attempts])
		return
	}
	w.chk.Pass(InvFleetDeadLetter)
}

// checkKept checks a message sent to the dead-letter queue keeps the job's body and the other
// producers' attributes.
func (f *fleet) checkKept(p *workerProc, j *fleetJob, out core.Outgoing) bool {
	w := p.w
	if j == nil {
		return true
	}
	if !bytes.Equal(out.Body, j.body) {
		w.chk.Fail(InvFleetDeadLetter, "%s: job-%d dead-lettered with a body of %d bytes, sent with %d", p.name, j.n, len(out.Body), len(j.body))
		return false
	}
	names := make([]string, 0, len(j.foreign))
	for k := range j.foreign {
		names = append(names, k)
	}
	sort.Strings(names) // the first missing one is the one reported
	for _, k := range names {
		want, got := j.foreign[k], out.Typed[k]
		if got.Type != want.Type || got.String != want.String || !bytes.Equal(got.Binary, want.Binary) {
			w.chk.Fail(InvFleetDeadLetter, "%s: job-%d dead-lettered with attribute %s = %+v, sent with %+v", p.name, j.n, k, got, want)
			return false
		}
	}
	w.chk.Pass(InvFleetDeadLetter)
	return true
}

// checkSendBackoff checks the hide after a failed send of d's successor and returns the
// visibility performed (a planted defect flattens it to 1 s).
func (f *fleet) checkSendBackoff(w *World, d *fleetDelivery, v time.Duration) time.Duration {
	k := f.sendFails[d.m.ID] + 1
	f.sendFails[d.m.ID] = k
	if w.mutation == mutFleetFlatBackoff {
		v = time.Second
	}
	if want := min(time.Second<<min(k-1, 10), 15*time.Minute); v < want {
		w.chk.Fail(InvFleetSendBackoff, "%s's send failed for the %d-th time; hidden %v, want at least %v", d.m.ID, k, v, want)
	} else {
		w.chk.Pass(InvFleetSendBackoff)
	}
	return v
}

// checkHop checks a job message sent at now (id) toward its not-before time: its delay, and
// its place in the chain of sends since the wait began. parent is the chain of the message
// whose delivery sent it (zero for an enqueue).
func (f *fleet) checkHop(w *World, j *fleetJob, parent hopChain, s qjobs.Send, now time.Time, id string) {
	a := s.Attrs
	if !a.NotBefore.After(now) {
		if s.Message.Delay != 0 {
			w.chk.Fail(InvFleetResends, "job-%d: %s sent with a delay of %v, due already", j.n, id, s.Message.Delay)
		}
		return
	}
	c := hopChain{set: now, notBefore: a.NotBefore, sends: 1}
	if s.Why == qjobs.WhyDefer && parent.sends > 0 && parent.notBefore.Equal(a.NotBefore) {
		c = hopChain{set: parent.set, notBefore: parent.notBefore, sends: parent.sends + 1}
	}
	f.hops[id] = c
	// Clamped before rounding: a wait to year 9999 saturates time.Duration.
	want := min(queue.DelayMax, a.NotBefore.Sub(now))
	want = (want + time.Second - 1) / time.Second * time.Second
	wait := c.notBefore.Sub(c.set)
	bound := int(wait / queue.DelayMax)
	if wait%queue.DelayMax != 0 {
		bound++
	}
	switch {
	case s.Message.Delay != want:
		w.chk.Fail(InvFleetResends, "job-%d: %s (%s) delayed %v with %v left to its not-before time, want %v", j.n, id, s.Why, s.Message.Delay, a.NotBefore.Sub(now), want)
	case c.sends > bound:
		w.chk.Fail(InvFleetResends, "job-%d: %s is send %d toward a not-before time %v ahead of the first, at most %d", j.n, id, c.sends, wait, bound)
	default:
		w.chk.Pass(InvFleetResends)
	}
}

// checkAbandon checks the Done that directly follows an attempt's end.
func (f *fleet) checkAbandon(p *workerProc, d *fleetDelivery, dn qjobs.Done) {
	w := p.w
	want := d.cancelled && d.outcome.Result != qjobs.Success
	if got := dn.Disposition == qjobs.Release; got != want {
		w.chk.Fail(InvFleetAbandon, "%s: %s's attempt (cancelled %v, %v) ended in %s", p.name, dn.Receipt, d.cancelled, d.outcome.Result, dn.String())
		return
	}
	w.chk.Pass(InvFleetAbandon)
}

// settled reports whether the fleet's queue holds nothing but parked jobs' messages. It
// looks messages up one by one, and only once few are left: Status copies every body.
func (f *fleet) settled(w *World) bool {
	live, _, _ := w.queue.Counts()
	if live == 0 {
		return true
	}
	if live > len(f.parkedIDs) {
		return false
	}
	n := 0
	for _, id := range f.parkedIDs {
		if m, ok := w.queue.Message(w.now(), id); ok && (m.State == queue.Visible || m.State == queue.InFlight) {
			n++
		}
	}
	return n == live
}

// finish checks that every job sent reached a terminal state (at the end of a settled run).
func (f *fleet) finish(w *World) {
	if !w.liveness || !w.done() {
		return // not settled: liveness reports it
	}
	for _, p := range w.workers {
		if fp := f.procs[p.id]; fp != nil {
			f.checkStats(w, p.name, fp)
		}
	}
	for _, j := range f.jobs {
		switch {
		case j.refused:
			w.st.Jobs.Add("fleet-refused-too-large", 1)
		case j.parked && j.malformed == "":
			if j.runs > 0 || j.done || j.dead != nil {
				w.chk.Fail(InvFleetResends, "job-%d, due at %v, settled with runs %d, done %v, dead %v", j.n, j.due, j.runs, j.done, j.dead)
				return
			}
			w.st.Jobs.Add("fleet-parked", 1)
			w.chk.Pass(InvFleetResends)
		case j.malformed != "":
			if !j.deadAsIs || j.runs > 0 {
				w.chk.Fail(InvFleetNotJob, "job-%d's malformed message (%s) settled with dead-lettered %v, runs %d", j.n, j.malformed, j.deadAsIs, j.runs)
				return
			}
			w.st.Jobs.Add("fleet-not-a-job", 1)
			w.chk.Pass(InvFleetNotJob)
		case j.killer:
			// Its delivery budget or its deadline ends it, whichever comes first.
			if j.dead == nil || (j.dead.Reason != qjobs.ReasonLost && j.dead.Reason != qjobs.ReasonLate) || j.dead.Attempts != 0 || j.done {
				w.chk.Fail(InvFleetAttempts, "job-%d kills its process every attempt; settled done %v, dead %+v; want deliveries-lost or deadline, no attempt", j.n, j.done, j.dead)
				return
			}
			w.st.Jobs.Add("fleet-killer-dead-"+string(j.dead.Reason), 1)
			w.chk.Pass(InvFleetAttempts)
		case j.done:
			w.st.Jobs.Add("fleet-done", 1)
			w.chk.Pass(InvFleetTerminal)
		case j.dead != nil && j.dead.LastErr != "":
			w.st.Jobs.Add("fleet-dead-"+string(j.dead.Reason), 1)
			w.chk.Pass(InvFleetTerminal)
		default:
			w.chk.Fail(InvFleetTerminal, "job-%d settled neither done nor dead-lettered with an error (dead=%v, runs=%d)", j.n, j.dead, j.runs)
			return
		}
	}
	w.trace("world", "fleet: "+strconv.Itoa(len(f.jobs))+" jobs terminal")
}

// The fleet's invariants join the report's list here, after the others, so the list in
// check.go (and every other profile's report) stays as it was.
func init() {
	for _, inv := range []struct{ Name, Promise string }{
		{InvFleetTerminal, "fleet: every job sent ends done or dead-lettered with its last error"},
		{InvFleetAttempts, "fleet: no attempt past the job's budget, and no more attempts than the budget plus the crashes, lost leases and duplicates that explain them"},
		{InvFleetBreaker, "fleet: no process starts an attempt on a target whose breaker there is open"},
		{InvFleetSingleHolder, "fleet: no attempt of a job starts while another process runs one under a lease it holds"},
		{InvFleetNotJob, "fleet: a message with damaged job attributes is refused naming them, never runs, and is dead-lettered as it is; a well-formed one is never refused"},
		{InvFleetAbandon, "fleet: an attempt cancelled without success is abandoned (released, its probe given back); every other ends by its outcome"},
		{InvFleetStop, "fleet: a graceful stop spends no attempt: the job's next run carries the stopped attempt's number"},
		{InvFleetDeadLetter, "fleet: a dead letter keeps the body and every attribute it came with (Binary included) and carries its last attempt's error"},
		{InvFleetOneJob, "fleet: a job id enqueued once runs as one job, unless its enqueue was reported ambiguous"},
		{InvFleetSendBackoff, "fleet: a message whose successor keeps failing to send is hidden ever longer, never retried every second"},
		{InvFleetResends, "fleet: a send toward a not-before time is delayed min(DelayMax, the time left), and a job waiting for T is sent at most ceil(T/DelayMax) times without a run"},
	} {
		invIndex[inv.Name] = len(Invariants)
		Invariants = append(Invariants, inv)
	}
}
