// Package netfault is what a simulated queue client returns for a transport call whose fate
// the network drew (sim/faults.Call): one mapping, shared by sim's worlds and sluicetest's, so
// a drawn fault reaches the worker as the same error in both.
package netfault

import (
	"errors"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/faults"
)

// CodeStale is the queue's answer for a receipt that is no longer valid (SQS's code).
const CodeStale = "ReceiptHandleIsInvalid"

// ErrUnclassed is a failure that is no *core.TransportError (a client library's own error), a
// breach of the transport's contract: the worker must treat it as retryable and as possibly
// taken effect (core.ClassOf).
var ErrUnclassed = errors.New("simulated connection reset by peer")

// Err is a transport error of class for op with the queue's error code.
func Err(class core.Class, op, code string) error {
	return &core.TransportError{Class: class, Op: op, Code: code, Err: errors.New("simulated " + code)}
}

// Lost is the failure a caller sees when its call's reply is lost (faults.CallFailAfter, and a
// timeout on the way out): retryable, the caller cannot tell whether the call took effect.
func Lost(op string) error { return Err(core.Retryable, op, "RequestTimeout") }

// Stale is one entry's answer to a receipt-naming call drawn faults.CallStale: gone.
func Stale(op string) error { return Err(core.Gone, op, CodeStale) }

// Call is the whole call's error for a fate that fails it without effect (throttled, a server
// error, fatal, or failed before it left); nil for CallOK. CallStale is answered per entry
// (Stale) by a batch call; a receive, which names no receipt, never draws it.
func Call(fate faults.Call, op string) error {
	switch fate {
	case faults.CallOK:
		return nil
	case faults.CallThrottle:
		return Err(core.Retryable, op, "ThrottlingException")
	case faults.CallServerError:
		return Err(core.Retryable, op, "InternalError")
	case faults.CallFatal:
		return Err(core.Fatal, op, "AccessDenied")
	}
	return Lost(op)
}

// Miscount breaks a batch reply's contract (faults.BreachCount): one entry too few, when
// fewer is true and there is more than one, or one too many.
func Miscount(entries []error, fewer bool) []error {
	if len(entries) > 1 && fewer {
		return entries[:len(entries)-1]
	}
	return append(entries, nil)
}
