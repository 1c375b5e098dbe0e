package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/core/lease"
)

// Node is the worker's host: the Machine and the protocol every executor follows (the
// production driver in package sluice, the simulator, sluicetest), so none of them decides or
// copies a step. An executor loops:
//
//	n.Step(ev)            // an event, then every event already waiting (a burst)
//	rd := n.Ready()       // the effects, once
//	rd.Perform(x)         // in the order written on Ready
//	next := n.Advance()   // then: exit, or arm one timer
//	if next.Exit { return next.Err }
//	arm(next.Wake)
//
// Node refuses a Step between Ready and Advance (the effects handed out must be performed
// before more events arrive) and any Step after the exit. It is single-owner, like Machine.
type Node struct {
	m *Machine
	// Invariant: out is true between Ready and Advance.
	out bool
	// Invariant: once exited, no Step is taken.
	exited bool
}

// Errors of a Node's misuse (driver bugs); Step leaves the Node as it was.
var (
	// ErrNotAdvanced is returned by Step between Ready and Advance.
	ErrNotAdvanced = errors.New("worker: Step before Advance: perform the Ready handed out, then call Advance")
	// ErrExited is returned by Step after Advance reported the exit.
	ErrExited = errors.New("worker: Step after the exit")
)

// Next is what an executor does after performing a Ready.
type Next struct {
	// Wake is when the Node next needs a Tick: re-arm the executor's one timer for it
	// (replacing any earlier one); zero means no timer.
	Wake time.Time
	// Exit: the worker is done (stopped, with nothing left in flight that names a held
	// receipt). The executor stops: Run returns Err. Reported once; Step is refused after it.
	Exit bool
	// Err is, with Exit, the fatal receive error that ended the worker (nil after Shutdown).
	// A fatal receive error always ends the worker this way: it is never retried.
	Err error
}

// NewNode returns a Node over a Machine for cfg (see New).
func NewNode(cfg Config) (*Node, error) {
	m, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &Node{m: m}, nil
}

// Step applies one event (see Machine.Step). It returns an error for misuse only: an event
// the Machine refuses, a Step between Ready and Advance, or one after the exit.
func (n *Node) Step(ev Event) error {
	switch {
	case n.exited:
		return fmt.Errorf("%w: %T", ErrExited, ev)
	case n.out:
		return fmt.Errorf("%w: %T", ErrNotAdvanced, ev)
	}
	return n.m.Step(ev)
}

// Ready hands out the effects produced since the last Advance. Call it once after a Step or
// a burst of Steps, perform it (Perform), then call Advance. A second Ready before Advance,
// or one after the exit, is a driver bug and panics.
func (n *Node) Ready() Ready {
	if n.out || n.exited {
		panic("worker: Node.Ready called twice without Advance, or after the exit")
	}
	n.out = true
	return n.m.Ready()
}

// Advance records that the Ready handed out was performed and says what follows. It panics
// without a Ready outstanding (a driver bug).
func (n *Node) Advance() Next {
	if !n.out {
		panic("worker: Node.Advance without a Ready handed out")
	}
	n.out = false
	if n.m.Done() {
		n.exited = true
		return Next{Exit: true, Err: n.m.Err()}
	}
	return Next{Wake: n.m.WakeAt()}
}

// Exited reports whether Advance reported the exit.
func (n *Node) Exited() bool { return n.exited }

// Status returns the Machine's Status.
func (n *Node) Status() Status { return n.m.Status() }

// WakeAt returns the Machine's WakeAt: the Wake the next Advance would report.
func (n *Node) WakeAt() time.Time { return n.m.WakeAt() }

// Err returns the fatal receive error that stopped the worker, nil when none.
func (n *Node) Err() error { return n.m.Err() }

// Lease exposes the lease of receipt read-only, for checkers.
func (n *Node) Lease(receipt string) (lease.Lease, bool) { return n.m.Lease(receipt) }

// Leased reports whether the lease machine still holds receipt.
func (n *Node) Leased(receipt string) bool { return n.m.Leased(receipt) }

// CheckInvariants checks the Machine's invariants and the Node's own.
func (n *Node) CheckInvariants() error {
	if n.exited && !n.m.Done() {
		return errors.New("worker: node exited but the machine is not done")
	}
	return n.m.CheckInvariants()
}

// Executor performs effects, one method per kind; Ready.Perform calls it in the contract's
// order. Each call must eventually produce its reply event (ReceiveDone, CallDone,
// HandlerDone) exactly once, also when it was cancelled or abandoned.
type Executor interface {
	// CancelHandler cancels a running handler's context for c.Reason.
	CancelHandler(c CancelHandler)
	// AbandonReceive cancels the receive call's context; its ReceiveDone still follows.
	AbandonReceive(call CallID)
	// AbandonCall cancels a lease call's context; nothing waits for its CallDone.
	AbandonCall(call lease.CallID)
	// ChangeVisibility and Delete issue a lease call under a context ending at its Deadline.
	ChangeVisibility(c lease.ChangeVisibility)
	Delete(d lease.Delete)
	// Receive issues the receive call right away (its Stamp was read before it).
	Receive(r Receive)
	// StartHandler runs the handler for s.Message under a context of its own.
	StartHandler(s StartHandler)
}

// Perform carries out rd through x in the order written on Ready: cancels, abandoned
// receive, abandoned calls, visibility changes, deletes, the receive, handler starts.
func (rd Ready) Perform(x Executor) {
	for _, c := range rd.Cancel {
		x.CancelHandler(c)
	}
	if rd.AbandonReceive != 0 {
		x.AbandonReceive(rd.AbandonReceive)
	}
	for _, id := range rd.AbandonCalls {
		x.AbandonCall(id)
	}
	for _, c := range rd.Changes {
		x.ChangeVisibility(c)
	}
	for _, d := range rd.Deletes {
		x.Delete(d)
	}
	if rd.Receive != nil {
		x.Receive(*rd.Receive)
	}
	for _, s := range rd.Start {
		x.StartHandler(s)
	}
}

// Empty reports whether rd holds no effect.
func (rd Ready) Empty() bool {
	return len(rd.Cancel)+len(rd.AbandonCalls)+len(rd.Changes)+len(rd.Deletes)+len(rd.Start) == 0 &&
		rd.AbandonReceive == 0 && rd.Receive == nil
}
