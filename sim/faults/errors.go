package faults

import (
	"context"
	"errors"
	"strings"

	"github.com/sluicehq/sluice/core"
)

// The errors a transport call's drawn fate shows its caller, and how a reply renders in a
// trace.

// TransportErr is a classified transport failure of op with the queue's code.
func TransportErr(class core.Class, op, code string) error {
	return &core.TransportError{Class: class, Op: op, Code: code, Err: errors.New("simulated " + code)}
}

// CodeStale is the queue's answer for a receipt that is no longer valid (SQS's code).
const CodeStale = "ReceiptHandleIsInvalid"

// Lost is the failure a caller sees when its call's reply is lost (CallFailAfter, and a
// timeout on the way out): retryable, the caller cannot tell whether the call took effect.
func Lost(op string) error { return TransportErr(core.Retryable, op, "RequestTimeout") }

// Stale is one entry's answer to a receipt-naming call drawn CallStale: gone.
func Stale(op string) error { return TransportErr(core.Gone, op, CodeStale) }

// Miscount breaks a batch reply's contract (BreachCount): one entry too few, when fewer is
// true and there is more than one, or one too many.
func Miscount(entries []error, fewer bool) []error {
	if len(entries) > 1 && fewer {
		return entries[:len(entries)-1]
	}
	return append(entries, nil)
}

// Err is the error a caller of op sees for a call that failed with fate c; nil for CallOK.
// CallStale is answered per entry (Stale) by a batch call.
func (c Call) Err(op string) error {
	switch c {
	case CallOK:
		return nil
	case CallThrottle:
		return TransportErr(core.Retryable, op, "ThrottlingException")
	case CallServerError:
		return TransportErr(core.Retryable, op, "InternalError")
	case CallFatal:
		return TransportErr(core.Fatal, op, "AccessDenied")
	default:
		return Lost(op)
	}
}

// ErrUnclassed is a failure that is no *core.TransportError (a client library's own error):
// the worker must treat it as retryable and as possibly taken effect (core.ClassOf).
var ErrUnclassed = errors.New("simulated connection reset by peer")

// AsCaller is a batch reply's whole-call error as its caller sees it: a reply with the wrong
// number of entries (a contract breach) fails every entry retryably.
func AsCaller(receipts []string, entries []error, whole error) error {
	if whole == nil && len(entries) != len(receipts) {
		return TransportErr(core.Retryable, "batch", "")
	}
	return whole
}

// DescribeReply renders a batch reply for a trace: the whole call's class, or each entry's
// ("ok", or its class and code).
func DescribeReply(entries []error, whole error) string {
	if whole != nil {
		s := "error " + core.ClassOf(whole).String()
		if errors.Is(whole, context.DeadlineExceeded) || errors.Is(whole, context.Canceled) {
			s += " (its context ended)"
		}
		return s
	}
	var b strings.Builder
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		if e == nil {
			b.WriteString("ok")
		} else {
			b.WriteString(core.ClassOf(e).String())
			var te *core.TransportError
			if errors.As(e, &te) && te.Code != "" {
				b.WriteString(":" + te.Code)
			}
		}
	}
	return b.String()
}
