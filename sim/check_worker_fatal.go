package sim

import (
	"errors"
	"time"

	"github.com/sluicehq/sluice/core"
)

// InvFatalEndsRun: a fatal receive error ends the worker's Run, which returns that error.
const InvFatalEndsRun = "worker-fatal-ends-run"

func init() {
	invIndex[InvFatalEndsRun] = len(Invariants)
	Invariants = append(Invariants, struct{ Name, Promise string }{InvFatalEndsRun,
		"a fatal receive error (access denied) ends the worker's Run within its grace periods, and Run returns that error; no Run ends with an error no receive returned"})
}

// revokeFamily draws the fatal-receive family from its own stream (so a seed where it is off
// runs as before): in one seed in four whose network faults are on, one worker's
// permission is revoked once at a drawn moment of the safety phase; its next receive is
// answered AccessDenied.
func (w *World) revokeFamily() {
	c := w.cfg
	r := Stream(c.Seed, "worker-fatal")
	on, victim, at := r.Intn(4) == 0, r.Intn(c.Workers), drawBetween(r, time.Second, c.Safety*4/5)
	if on && c.Faults.Transport.On() {
		w.workers[victim].revokeAt = at
	}
}

// revoked reports whether this receive meets the revoked permission (once, in the safety
// phase).
func (p *workerProc) revoked() bool {
	w := p.w
	if p.revokeAt == 0 || !w.faultsOn || w.loop.Now() < p.revokeAt {
		return false
	}
	p.revokeAt = 0
	w.fault("receive-access-revoked")
	return true
}

// fatalReceived notes a fatal receive error delivered while the process was not stopping:
// its Run must end with it within a bound. It returns the error to step (mutFatalAsRetry: a
// retryable one).
func (p *workerProc) fatalReceived(err error) error {
	w := p.w
	if core.ClassOf(err) != core.Fatal || p.stopping {
		return err
	}
	p.stopping, p.fatalErr = true, err
	w.trace(p.name, "FATAL "+err.Error())
	w.st.Crashes.Add("worker-fatal", 1)
	gen, bound := p.gen, 2*w.cfg.Grace+2*w.cfg.Visibility+time.Minute
	w.loop.After(bound, func() {
		if p.up && p.gen == gen {
			w.chk.Fail(InvFatalEndsRun, "%s: still up %v after a fatal receive error (%v): Run did not end, or the process ignored it", p.name, bound, err)
		}
	})
	if w.mutation == mutFatalAsRetry {
		return &core.TransportError{Class: core.Retryable, Op: "receive", Err: errors.New("a fatal error taken as retryable")}
	}
	return err
}

// checkExit checks the error Run ended with against the fatal receive error delivered.
func (p *workerProc) checkExit(err error) {
	w := p.w
	switch {
	case p.fatalErr != nil && err != p.fatalErr:
		w.chk.Fail(InvFatalEndsRun, "%s: Run ended with %v after the fatal receive error %v, want that error", p.name, err, p.fatalErr)
	case p.fatalErr == nil && err != nil:
		w.chk.Fail(InvFatalEndsRun, "%s: Run ended with %v, which no receive returned while it ran", p.name, err)
	default:
		w.chk.Pass(InvFatalEndsRun)
	}
}
