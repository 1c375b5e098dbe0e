package sqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/sluicehq/sluice/core"
)

// queryPrefix is what SQS's query-compatible error codes carry in front of the code.
const queryPrefix = "AWS.SimpleQueueService."

// goneCodes name a receipt whose message was redelivered or deleted.
var goneCodes = map[string]bool{
	"MessageNotInflight":     true,
	"ReceiptHandleIsInvalid": true,
}

// retryableCodes clear with time: the SDK's throttle and timeout codes, and SQS's own.
var retryableCodes = func() map[string]bool {
	m := map[string]bool{
		"RequestThrottled":    true,
		"KmsThrottled":        true,
		"OverLimit":           true, // too many messages in flight: clears as they are deleted
		"InternalError":       true,
		"InternalFailure":     true,
		"ServiceUnavailable":  true,
		"RequestTimeout":      true,
		"RequestTimeoutError": true,
	}
	for c := range retry.DefaultThrottleErrorCodes {
		m[c] = true
	}
	for c := range retry.DefaultRetryableErrorCodes {
		m[c] = true
	}
	return m
}()

func normalizeCode(code string) string { return strings.TrimPrefix(code, queryPrefix) }

// expiredReceipt recognises SQS's InvalidParameterValue for a receipt handle that expired
// ("Value ... for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired.").
func expiredReceipt(msg string) bool {
	m := strings.ToLower(msg)
	return strings.Contains(m, "receipt") && strings.Contains(m, "expired")
}

func classOfCode(code, msg string) (core.Class, bool) {
	switch {
	case goneCodes[code]:
		return core.Gone, true
	case code == "InvalidParameterValue" && expiredReceipt(msg):
		return core.Gone, true
	case retryableCodes[code]:
		return core.Retryable, true
	}
	return 0, false
}

// classify wraps a failed call's error as a *core.TransportError with its docs/worker.md class.
func classify(op string, err error) *core.TransportError {
	te := &core.TransportError{Op: op, Err: err}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		te.Code = normalizeCode(ae.ErrorCode())
		if c, ok := classOfCode(te.Code, ae.ErrorMessage()); ok {
			te.Class = c
			return te
		}
	}
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) {
		if s := status.HTTPStatusCode(); s == 429 || s >= 500 {
			te.Class = core.Retryable
			return te
		}
	}
	if transient(err) {
		te.Class = core.Retryable
		return te
	}
	te.Class = core.Fatal
	return te
}

// transient reports timeouts, cancellation and connection failures: the call may not have
// reached SQS, or its answer did not reach us.
func transient(err error) bool {
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	return retry.RetryableConnectionError{}.IsErrorRetryable(err) == aws.TrueTernary
}

// classifyEntry classes one failed batch entry.
func classifyEntry(op string, e *EntryError) error {
	code := normalizeCode(e.Code)
	class, ok := classOfCode(code, e.Message)
	if !ok {
		class = core.Fatal
		if !e.SenderFault {
			class = core.Retryable
		}
	}
	return &core.TransportError{Class: class, Op: op, Code: code, Err: e}
}

// classifySend classes a failed send as classify does and, when the queue may have stored
// the message, wraps core.ErrSendUnknown: an answer of 5xx or one that could not be read (a
// truncated body, a checksum mismatch), or a connection that failed after the request may
// have reached the queue (a reset, a timeout). An answer of 4xx (a refusal, throttling)
// and a connection that was never made mean nothing was stored.
func classifySend(op string, err error) *core.TransportError {
	te := classify(op, err)
	if sendUnknown(err) {
		te.Err = unknown(te.Err)
		if te.Class == core.Fatal {
			te.Class = core.Retryable
		}
	}
	return te
}

func unknown(err error) error { return fmt.Errorf("%w: %w", err, core.ErrSendUnknown) }

func sendUnknown(err error) bool {
	// The SDK wraps a failure to send in a response error of status 0: no answer came.
	var status interface{ HTTPStatusCode() int }
	if errors.As(err, &status) && status.HTTPStatusCode() != 0 {
		s := status.HTTPStatusCode()
		return s < 400 || s >= 500
	}
	var se *smithyhttp.RequestSendError
	if !errors.As(err, &se) {
		return false // the SDK failed before sending (credentials, serialization)
	}
	var oe *net.OpError
	return !errors.As(err, &oe) || oe.Op != "dial"
}
