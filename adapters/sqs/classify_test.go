package sqs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core"
)

// httpErr builds the error the SDK returns for an HTTP response with status and an API error.
func httpErr(status int, api error) error {
	return &smithy.OperationError{ServiceID: "SQS", OperationName: "ChangeMessageVisibility", Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
			Err:      api,
		},
	}}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

type classified struct {
	Class core.Class
	Code  string
}

func TestClassifyMapsSQSErrorsToSpecClasses(t *testing.T) {
	expired := "Value AQEB for parameter ReceiptHandle is invalid. Reason: The receipt handle has expired."
	tests := []struct {
		name string
		err  error
		want classified
	}{
		{"message not in flight", httpErr(400, &types.MessageNotInflight{}), classified{core.Gone, "MessageNotInflight"}},
		{"query-compatible code", httpErr(400, &types.MessageNotInflight{ErrorCodeOverride: aws.String("AWS.SimpleQueueService.MessageNotInflight")}), classified{core.Gone, "MessageNotInflight"}},
		{"receipt handle invalid", httpErr(400, &types.ReceiptHandleIsInvalid{}), classified{core.Gone, "ReceiptHandleIsInvalid"}},
		{"expired receipt", httpErr(400, &smithy.GenericAPIError{Code: "InvalidParameterValue", Message: expired}), classified{core.Gone, "InvalidParameterValue"}},
		{"visibility out of range", httpErr(400, &smithy.GenericAPIError{Code: "AWS.SimpleQueueService.InvalidParameterValue", Message: "Value 43201 for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200."}), classified{core.Fatal, "InvalidParameterValue"}},
		{"request throttled", httpErr(400, &types.RequestThrottled{}), classified{core.Retryable, "RequestThrottled"}},
		{"throttling exception", httpErr(400, &smithy.GenericAPIError{Code: "ThrottlingException"}), classified{core.Retryable, "ThrottlingException"}},
		{"kms throttled", httpErr(400, &types.KmsThrottled{}), classified{core.Retryable, "KmsThrottled"}},
		{"over limit", httpErr(403, &types.OverLimit{}), classified{core.Retryable, "OverLimit"}},
		{"request timeout code", httpErr(400, &smithy.GenericAPIError{Code: "RequestTimeout"}), classified{core.Retryable, "RequestTimeout"}},
		{"internal error 500", httpErr(500, &smithy.GenericAPIError{Code: "InternalError", Fault: smithy.FaultServer}), classified{core.Retryable, "InternalError"}},
		{"unknown code on 503", httpErr(503, &smithy.GenericAPIError{Code: "Whatever"}), classified{core.Retryable, "Whatever"}},
		{"bare 502", httpErr(502, errors.New("bad gateway")), classified{core.Retryable, ""}},
		{"429", httpErr(429, errors.New("too many requests")), classified{core.Retryable, ""}},
		{"access denied", httpErr(403, &smithy.GenericAPIError{Code: "AccessDenied"}), classified{core.Fatal, "AccessDenied"}},
		{"bad token", httpErr(403, &smithy.GenericAPIError{Code: "InvalidClientTokenId"}), classified{core.Fatal, "InvalidClientTokenId"}},
		{"queue does not exist", httpErr(400, &types.QueueDoesNotExist{}), classified{core.Fatal, "QueueDoesNotExist"}},
		{"invalid address", httpErr(400, &types.InvalidAddress{}), classified{core.Fatal, "InvalidAddress"}},
		{"too many batch entries", httpErr(400, &types.TooManyEntriesInBatchRequest{}), classified{core.Fatal, "TooManyEntriesInBatchRequest"}},
		{"bare 400", httpErr(400, errors.New("bad request")), classified{core.Fatal, ""}},
		{"call timeout", &smithy.OperationError{Err: fmt.Errorf("send: %w", context.DeadlineExceeded)}, classified{core.Retryable, ""}},
		{"base context cancelled", &smithy.OperationError{Err: context.Canceled}, classified{core.Retryable, ""}},
		{"connection refused", &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}}}, classified{core.Retryable, ""}},
		{"connection reset", &smithy.OperationError{Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}, classified{core.Retryable, ""}},
		{"unexpected EOF", &smithy.OperationError{Err: fmt.Errorf("read body: %w", io.ErrUnexpectedEOF)}, classified{core.Retryable, ""}},
		{"net timeout", &smithy.OperationError{Err: &url.Error{Op: "Post", URL: "x", Err: timeoutErr{}}}, classified{core.Retryable, ""}},
		{"unknown host", &smithy.OperationError{Err: &net.DNSError{Err: "no such host", Name: "sqs.nowhere", IsNotFound: true}}, classified{core.Fatal, ""}},
		{"anything else", errors.New("serialization failed"), classified{core.Fatal, ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := classify("change-visibility", fmt.Errorf("sqs: change visibility: %w", tt.err))
			if diff := cmp.Diff(tt.want, classified{te.Class, te.Code}); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			if !errors.Is(te, tt.err) || te.Op != "change-visibility" {
				t.Fatalf("the transport error %v does not wrap the cause or lost its op", te)
			}
			if core.ClassOf(te) != tt.want.Class {
				t.Fatalf("core.ClassOf = %v", core.ClassOf(te))
			}
		})
	}
}

func TestClassifyEntryMapsBatchEntryFailures(t *testing.T) {
	tests := []struct {
		name string
		e    EntryError
		want classified
	}{
		{"receipt invalid", EntryError{Code: "ReceiptHandleIsInvalid", SenderFault: true}, classified{core.Gone, "ReceiptHandleIsInvalid"}},
		{"not in flight, query code", EntryError{Code: "AWS.SimpleQueueService.MessageNotInflight", SenderFault: true}, classified{core.Gone, "MessageNotInflight"}},
		{"expired receipt", EntryError{Code: "InvalidParameterValue", Message: "The receipt handle has expired.", SenderFault: true}, classified{core.Gone, "InvalidParameterValue"}},
		{"bad parameter", EntryError{Code: "InvalidParameterValue", Message: "Value 50000 for parameter VisibilityTimeout is invalid.", SenderFault: true}, classified{core.Fatal, "InvalidParameterValue"}},
		{"throttled", EntryError{Code: "RequestThrottled", SenderFault: true}, classified{core.Retryable, "RequestThrottled"}},
		{"server fault", EntryError{Code: "InternalError", SenderFault: false}, classified{core.Retryable, "InternalError"}},
		{"unknown server fault", EntryError{Code: "Mystery", SenderFault: false}, classified{core.Retryable, "Mystery"}},
		{"unknown sender fault", EntryError{Code: "Mystery", SenderFault: true}, classified{core.Fatal, "Mystery"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var te *core.TransportError
			if !errors.As(classifyEntry("delete", &tt.e), &te) {
				t.Fatal("not a *core.TransportError")
			}
			if diff := cmp.Diff(tt.want, classified{te.Class, te.Code}); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEntryResultsKeepEntryOrder(t *testing.T) {
	errs := entryResults("delete", 4, []string{"3", "0", "junk"}, []types.BatchResultErrorEntry{
		{Id: aws.String("1"), Code: aws.String("ReceiptHandleIsInvalid"), SenderFault: true},
		{Id: aws.String("7")}, // not an entry we sent: ignored
	})
	got := make([]string, len(errs))
	for i, err := range errs {
		got[i] = "ok"
		var te *core.TransportError
		if errors.As(err, &te) {
			got[i] = te.Class.String() + "/" + te.Code
		} else if err != nil {
			got[i] = "untyped"
		}
	}
	want := []string{"ok", "gone/ReceiptHandleIsInvalid", "retryable/NoEntryResult", "ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

// TestClassifySendTellsUnknownFromRefused: a send whose answer was lost or unreadable, or
// that the server failed with a 5xx, may have been stored (ErrSendUnknown); a 4xx answer, a
// connection never made, or an SDK failure before sending stored nothing.
func TestClassifySendTellsUnknownFromRefused(t *testing.T) {
	sendErr := func(err error) error { // as the SDK wraps it: a response error of status 0
		return &smithy.OperationError{ServiceID: "SQS", OperationName: "SendMessage", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{}},
				Err:      &smithyhttp.RequestSendError{Err: err},
			},
		}}
	}
	post := func(err error) error { return &url.Error{Op: "Post", URL: "http://127.0.0.1:1", Err: err} }
	tests := []struct {
		name    string
		err     error
		unknown bool
		class   core.Class
	}{
		{"5xx", httpErr(500, &smithy.GenericAPIError{Code: "InternalError"}), true, core.Retryable},
		{"503 without a code", httpErr(503, errors.New("bad gateway")), true, core.Retryable},
		{"answer truncated", httpErr(200, &smithy.DeserializationError{Err: io.ErrUnexpectedEOF}), true, core.Retryable},
		{"connection reset", sendErr(post(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET})), true, core.Retryable},
		{"EOF", sendErr(post(io.EOF)), true, core.Retryable},
		{"timeout", sendErr(post(context.DeadlineExceeded)), true, core.Retryable},
		{"throttled", httpErr(400, &smithy.GenericAPIError{Code: "ThrottlingException"}), false, core.Retryable},
		{"refused", httpErr(400, &smithy.GenericAPIError{Code: "InvalidParameterValue"}), false, core.Fatal},
		{"connection refused", sendErr(post(&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED})), false, core.Retryable},
		{"before sending", &smithy.OperationError{ServiceID: "SQS", OperationName: "SendMessage", Err: errors.New("no credentials")}, false, core.Fatal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			te := classifySend("send", fmt.Errorf("sqs: send to q: %w", tt.err))
			if got := errors.Is(te, core.ErrSendUnknown); got != tt.unknown {
				t.Errorf("errors.Is(%v, ErrSendUnknown) = %v, want %v", te, got, tt.unknown)
			}
			if te.Class != tt.class {
				t.Errorf("class %v, want %v", te.Class, tt.class)
			}
			if !errors.Is(te, tt.err) {
				t.Errorf("%v does not wrap the SDK's error", te)
			}
		})
	}
}

// fakeSend answers SendMessageBatch with out.
type fakeSend struct {
	out *awssqs.SendMessageBatchOutput
}

func (f fakeSend) SendMessage(context.Context, *awssqs.SendMessageInput, ...func(*awssqs.Options)) (*awssqs.SendMessageOutput, error) {
	panic("not called")
}

func (f fakeSend) SendMessageBatch(context.Context, *awssqs.SendMessageBatchInput, ...func(*awssqs.Options)) (*awssqs.SendMessageBatchOutput, error) {
	return f.out, nil
}

// TestSendBatchEntryResults: a failed entry is a refusal (not ErrSendUnknown); an entry SQS
// answered neither way may have been stored (ErrSendUnknown).
func TestSendBatchEntryResults(t *testing.T) {
	snd, err := NewSender(fakeSend{out: &awssqs.SendMessageBatchOutput{
		Successful: []types.SendMessageBatchResultEntry{{Id: aws.String("0")}},
		Failed:     []types.BatchResultErrorEntry{{Id: aws.String("1"), Code: aws.String("InvalidParameterValue"), SenderFault: true}},
	}}, Config{QueueURL: "http://127.0.0.1:1/000000000000/q"})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := snd.SendBatch(context.Background(), make([]core.Outgoing, 3))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]string, len(errs))
	for i, e := range errs {
		got[i] = fmt.Sprintf("%v unknown=%v", core.ClassOf(e), errors.Is(e, core.ErrSendUnknown))
	}
	want := []string{
		fmt.Sprintf("%v unknown=false", core.Class(0)),
		fmt.Sprintf("%v unknown=false", core.Fatal),
		fmt.Sprintf("%v unknown=true", core.Retryable),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
}
