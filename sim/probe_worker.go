package sim

import (
	"errors"
	"math/rand"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/lease"
	"github.com/sluicehq/sluice/core/worker"
)

// The misuse family of the worker side: a production driver can have bugs, so before one step
// in probeEvery a worker process first makes the call a buggy driver would (a Step without a
// time, a reply to a call that is not in flight, a result for a handler that is not running
// or outside the outcome table, a receive reply naming a receipt twice or one already held),
// and checks that the machine refuses it with the documented error and that nothing changed:
// its status, its wake time and every lease it holds. The draws come from the process's own
// stream ("worker-probe/<id>"), and a probe that holds writes no trace line, so the world's
// other choices and its trace stay as they were.

// InvMisuseRefused: every misuse of a machine is refused with its documented error and
// changes nothing.
const InvMisuseRefused = "misuse-refused"

// mutProbeTakes plants a probe that makes a legitimate call (a Tick at the step's time) and
// expects it refused, to show the misuse invariant fires (probe_worker_test.go).
const mutProbeTakes mutation = 110

// probeEvery: one step in this many is preceded by a probe (each costs two status copies).
const probeEvery = 48

// probeView is what a probe compares before and after: the machine's status, wake and leases.
type probeView struct {
	status worker.Status
	wake   time.Time
	leases []lease.Lease
}

func (p *workerProc) probeView() probeView {
	v := probeView{status: p.e.Status(), wake: p.e.WakeAt()}
	for _, r := range p.open {
		if l, ok := p.e.Lease(r); ok {
			v.leases = append(v.leases, l)
		}
	}
	return v
}

// maybeProbe runs one drawn misuse before ev is stepped (at ev's time).
func (p *workerProc) maybeProbe(ev worker.Event) {
	if p.rProbe == nil {
		p.rProbe = Stream(p.w.cfg.Seed, "worker-probe/"+strconv.Itoa(p.id))
	}
	r := p.rProbe
	if r.Intn(probeEvery) != 0 || p.pending {
		return // (in an open burst the driver has not seen the machine's last decisions)
	}
	var now time.Time
	switch ev := ev.(type) {
	case worker.Tick:
		now = ev.Now
	case worker.ReceiveDone:
		now = ev.Now
		if len(ev.Messages) > 0 && ev.Err == nil {
			switch r.Intn(3) {
			case 0:
				p.probe(badReceive(r, ev, p.heldReceipt(r)), lease.ErrDuplicate, "")
				return
			case 1:
				p.probeLease(r, p.recvStamp, ev.Now, ev.Messages)
				return
			}
		}
	case worker.CallDone:
		now = ev.Now
	case worker.HandlerDone:
		now = ev.Now
	case worker.Shutdown:
		now = ev.Now
	}
	if p.w.mutation == mutProbeTakes {
		p.probe(worker.Tick{Now: now}, worker.ErrUnknownCall, "")
		return
	}
	switch r.Intn(5) {
	case 0:
		p.probe(worker.Tick{}, nil, "without a time")
	case 1:
		p.probe(worker.ReceiveDone{Call: worker.CallID(1 << 40), Now: now}, worker.ErrUnknownCall, "")
	case 2:
		p.probe(worker.CallDone{Call: lease.CallID(1 << 40), Now: now}, worker.ErrUnknownCall, "")
	case 3:
		// A result for a receipt whose handler is not running: unknown, waiting, or finished
		// (a second disposition).
		receipt := "no-such-receipt"
		if len(p.open) > 0 && r.Intn(2) == 0 {
			receipt = p.open[r.Intn(len(p.open))]
			if h := p.handlers[receipt]; h != nil && h.running {
				return // a running handler: its result would be legitimate
			}
			if done, ok := ev.(worker.HandlerDone); ok && done.Receipt == receipt {
				return // the handler that is reporting now
			}
		}
		p.probe(worker.HandlerDone{Receipt: receipt, Now: now, Result: worker.Result{Outcome: worker.Success}}, worker.ErrUnknownHandler, "")
	case 4:
		// An outcome outside the table for a running handler.
		for _, receipt := range p.open {
			if h := p.handlers[receipt]; h != nil && h.running {
				bad := []worker.Outcome{0, worker.Terminal + 1}[r.Intn(2)]
				p.probe(worker.HandlerDone{Receipt: receipt, Now: now, Result: worker.Result{Outcome: bad}}, worker.ErrBadResult, "")
				return
			}
		}
	}
}

// heldReceipt returns a receipt the machine holds now, or "".
func (p *workerProc) heldReceipt(r *rand.Rand) string {
	if len(p.open) == 0 {
		return ""
	}
	receipt := p.open[r.Intn(len(p.open))]
	if _, ok := p.e.Lease(receipt); !ok {
		return ""
	}
	return receipt
}

// badReceive is ev with one receipt named twice, or (when held is set, half the time) one
// already held, or empty.
func badReceive(r *rand.Rand, ev worker.ReceiveDone, held string) worker.ReceiveDone {
	msgs := append([]core.Message(nil), ev.Messages...)
	m := msgs[r.Intn(len(msgs))]
	switch {
	case held != "" && r.Intn(2) == 0:
		m.Receipt = held
		msgs[0] = m
	case r.Intn(4) == 0:
		m.Receipt = ""
		msgs[0] = m
	default:
		msgs = append(msgs, m)
	}
	ev.Messages = msgs
	return ev
}

// probe steps ev, which must be refused with want (or, when want is nil, an error saying
// what), and checks that it changed nothing.
func (p *workerProc) probe(ev worker.Event, want error, what string) {
	w := p.w
	before := p.probeView()
	err := p.e.Step(ev)
	refused := err != nil && (want == nil || errors.Is(err, want)) && (what == "" || strings.Contains(err.Error(), what))
	if !refused {
		w.chk.Fail(InvMisuseRefused, "%s: the worker machine took the misuse %T %+v: error %v, want %v %q", p.name, ev, ev, err, want, what)
		return
	}
	if after := p.probeView(); !reflect.DeepEqual(before, after) {
		w.chk.Fail(InvMisuseRefused, "%s: the refused %T (%v) changed the machine: %+v, then %+v", p.name, ev, err, before, after)
		return
	}
	w.chk.Pass(InvMisuseRefused)
}

func init() {
	invIndex[InvMisuseRefused] = len(Invariants)
	Invariants = append(Invariants, struct{ Name, Promise string }{InvMisuseRefused,
		"a machine refuses a driver's misuse (a Step without a time, an unknown call, receipt or handler, a second disposition, a result outside its table, a receipt twice) with its documented error, and the misuse changes nothing"})
}
