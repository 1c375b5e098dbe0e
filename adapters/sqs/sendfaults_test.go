package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

// stored counts the messages the queue holds (visible, in flight or delayed).
func stored(t *testing.T, c *awssqs.Client, url string) int {
	t.Helper()
	out, err := c.GetQueueAttributes(context.Background(), &awssqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages,
			types.QueueAttributeNameApproximateNumberOfMessagesNotVisible, types.QueueAttributeNameApproximateNumberOfMessagesDelayed}})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, _ := strconv.Atoi(v)
		n += k
	}
	return n
}

// TestTypedAttributesRoundTripOnFauxqs: every data type (String, Number, Binary, and each
// with a custom suffix) goes out in Typed and comes back in Message.Typed as sent, through
// SendMessage and SendMessageBatch; Attributes keeps the text ones.
func TestTypedAttributesRoundTripOnFauxqs(t *testing.T) {
	_, c, url := newQueue(t)
	ctx := context.Background()
	snd := newSender(t, c, url)
	typed := map[string]core.Attribute{
		"s":      {Type: "String", String: "hello"},
		"n":      {Type: "Number", String: "-12.5e3"},
		"b":      {Type: "Binary", Binary: []byte{0, 1, 0xfe, 0xff}},
		"n-int":  {Type: "Number.int", String: "42"},
		"b-gz":   {Type: "Binary.gz", Binary: []byte("\x1f\x8b")},
		"s-json": {Type: "String.json", String: `{"a":1}`},
	}
	plain := map[string]string{"sluice-kind": "email"}
	one := core.Outgoing{Body: []byte("one"), Attributes: plain, Typed: typed}
	if errs, err := snd.SendBatch(ctx, []core.Outgoing{one}); err != nil || errs[0] != nil {
		t.Fatalf("send one: %v %v", errs, err)
	}
	two := one
	two.Body = []byte("two")
	if errs, err := snd.SendBatch(ctx, []core.Outgoing{two, {Body: []byte("bare")}}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("send batch: %v %v", errs, err)
	}
	wantTyped := map[string]core.Attribute{"sluice-kind": {Type: "String", String: "email"}}
	for k, v := range typed {
		wantTyped[k] = v
	}
	wantText := map[string]string{"sluice-kind": "email", "s": "hello", "n": "-12.5e3", "n-int": "42", "s-json": `{"a":1}`}
	tr := newTransport(t, c, url)
	seen := 0
	for range 5 {
		msgs, err := tr.Receive(ctx, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			seen++
			if string(m.Body) == "bare" {
				if m.Typed != nil || m.Attributes != nil {
					t.Errorf("bare message: attributes %v, typed %v; want none", m.Attributes, m.Typed)
				}
				continue
			}
			if diff := cmp.Diff(wantTyped, m.Typed); diff != "" {
				t.Errorf("%s: typed (-want +got):\n%s", m.Body, diff)
			}
			if diff := cmp.Diff(wantText, m.Attributes); diff != "" {
				t.Errorf("%s: text attributes (-want +got):\n%s", m.Body, diff)
			}
		}
		if seen == 3 {
			break
		}
	}
	if seen != 3 {
		t.Fatalf("received %d messages, want 3", seen)
	}
}

// TestSendRefusesMisusedAttributesWithoutACall: a name in both maps, or a value of the wrong
// kind for its type, is a Fatal refusal naming the entry and the attribute; nothing is sent.
func TestSendRefusesMisusedAttributesWithoutACall(t *testing.T) {
	s := &fauxqs.Server{URL: "http://127.0.0.1:1"} // nothing listens: a call would be Retryable
	snd := newSender(t, newClient(t, s), s.URL+"/000000000000/q")
	for _, m := range []core.Outgoing{
		{Body: []byte("x"), Attributes: map[string]string{"a": "1"}, Typed: map[string]core.Attribute{"a": {Type: "String", String: "1"}}},
		{Body: []byte("x"), Typed: map[string]core.Attribute{"a": {Type: "Binary", String: "1"}}},
		{Body: []byte("x"), Typed: map[string]core.Attribute{"a": {Type: "Number", Binary: []byte("1")}}},
	} {
		_, err := snd.SendBatch(context.Background(), []core.Outgoing{{Body: []byte("ok")}, m})
		mustClass(t, fmt.Sprintf("typed %v", m.Typed), err, core.Fatal)
		if err == nil || !strings.Contains(err.Error(), "entry 1") || !strings.Contains(err.Error(), `"a"`) {
			t.Errorf("error %v does not name entry 1 and attribute \"a\"", err)
		}
	}
}

// TestSendRefusesDelayOutOfRangeWithoutACall: a delay SQS would refuse (or that would
// overflow its whole seconds) is a Fatal refusal naming the entry; nothing is sent.
func TestSendRefusesDelayOutOfRangeWithoutACall(t *testing.T) {
	s := &fauxqs.Server{URL: "http://127.0.0.1:1"} // nothing listens: a call would be Retryable
	snd := newSender(t, newClient(t, s), s.URL+"/000000000000/q")
	for _, d := range []time.Duration{-time.Second, sqs.DelayMax + time.Second, 292 * 365 * 24 * time.Hour} {
		_, err := snd.SendBatch(context.Background(), []core.Outgoing{{Body: []byte("ok")}, {Body: []byte("x"), Delay: d}})
		mustClass(t, fmt.Sprintf("delay %v", d), err, core.Fatal)
		if err == nil || !strings.Contains(err.Error(), "entry 1") || !strings.Contains(err.Error(), "delay") {
			t.Errorf("error %v does not name entry 1 and its delay", err)
		}
	}
}

// TestSendToNoServerStoredNothing: a connection never made is Retryable and not
// ErrSendUnknown, for SendMessage and SendMessageBatch.
func TestSendToNoServerStoredNothing(t *testing.T) {
	s := &fauxqs.Server{URL: "http://127.0.0.1:1"}
	snd := newSender(t, newClient(t, s), s.URL+"/000000000000/q")
	for _, n := range []int{1, 2} {
		errs, err := snd.SendBatch(context.Background(), make([]core.Outgoing, n))
		if err == nil {
			err = errs[0]
		}
		mustClass(t, fmt.Sprintf("a send of %d with nothing listening", n), err, core.Retryable)
		if errors.Is(err, core.ErrSendUnknown) {
			t.Errorf("a send of %d with nothing listening: %v, want no ErrSendUnknown", n, err)
		}
	}
}

// TestAmbiguousSendIsNeverResent runs each send through the fault proxy with exactly one
// fault, on a client that keeps the SDK's default retryer (3 attempts). A fault after the
// queue took the call (answer lost, answer cut short) leaves exactly what was sent stored
// once and the caller told ErrSendUnknown; so does a 5xx (the caller cannot know it stored
// nothing). A throttle answer stored nothing and is not ErrSendUnknown.
func TestAmbiguousSendIsNeverResent(t *testing.T) {
	server := fauxqs.Start(t)
	admin := newClient(t, server)
	tests := []struct {
		fault   faultproxy.Config
		batch   int
		stored  int
		unknown bool
	}{
		{faultproxy.Config{ResetAfter: 1}, 1, 1, true},
		{faultproxy.Config{ResetAfter: 1}, 10, 10, true},
		{faultproxy.Config{Truncate: 1}, 1, 1, true},
		{faultproxy.Config{Truncate: 1}, 3, 3, true},
		{faultproxy.Config{ServerError: 1}, 1, 0, true},
		{faultproxy.Config{ResetBefore: 1}, 2, 0, true}, // the request was written: the client cannot tell
		{faultproxy.Config{Throttle: 1}, 1, 0, false},
		{faultproxy.Config{Throttle: 1}, 4, 0, false},
	}
	for i, tt := range tests {
		cfg := tt.fault
		cfg.Target, cfg.Seed, cfg.MaxFaults = server.URL, int64(i), 1
		name := fmt.Sprintf("%d-batch%d", i, tt.batch)
		t.Run(name, func(t *testing.T) {
			url, err := sqs.CreateQueue(context.Background(), admin, queueName(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			px, err := faultproxy.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(px.Close)
			c, err := sqs.NewClient(context.Background(), sqs.ClientOptions{Endpoint: px.URL, Load: server.LoadOptions()})
			if err != nil {
				t.Fatal(err)
			}
			snd := newSender(t, c, url)
			msgs := make([]core.Outgoing, tt.batch)
			for j := range msgs {
				msgs[j] = core.Outgoing{Body: []byte(fmt.Sprint("m", j)), Attributes: map[string]string{"k": "v"}}
			}
			errs, err := snd.SendBatch(context.Background(), msgs)
			if err == nil && len(errs) == 1 {
				err = errs[0]
			}
			if err == nil {
				t.Fatalf("the send succeeded through a %v fault: the SDK resent it (%d stored)", px.Faults(), stored(t, admin, url))
			}
			if got := errors.Is(err, core.ErrSendUnknown); got != tt.unknown {
				t.Errorf("errors.Is(%v, ErrSendUnknown) = %v, want %v", err, got, tt.unknown)
			}
			if n := stored(t, admin, url); n != tt.stored {
				t.Errorf("%d messages stored, want %d (faults %v, %d calls)", n, tt.stored, px.Faults(), len(px.Log()))
			}
		})
	}
}

// TestFIFOOnFauxqs: fauxqs 1.9.2 keeps FIFO queues. A send carries its deduplication id (a
// second send of the same id within 5 minutes stores nothing more) and its group id (a send
// without one is refused, not ErrSendUnknown).
func TestFIFOOnFauxqs(t *testing.T) {
	s := fauxqs.Start(t)
	c := newClient(t, s)
	ctx := context.Background()
	url, err := sqs.CreateQueue(ctx, c, queueName(t)+".fifo", map[string]string{"FifoQueue": "true"})
	if err != nil {
		t.Fatal(err)
	}
	snd := newSender(t, c, url)
	m := core.Outgoing{Body: []byte("job"), DedupID: "job-1", GroupID: "key-a"}
	for range 2 {
		if errs, err := snd.SendBatch(ctx, []core.Outgoing{m}); err != nil || errs[0] != nil {
			t.Fatalf("send: %v %v", errs, err)
		}
	}
	if errs, err := snd.SendBatch(ctx, []core.Outgoing{m, {Body: []byte("other"), DedupID: "job-2", GroupID: "key-b"}}); err != nil || errs[0] != nil || errs[1] != nil {
		t.Fatalf("send batch: %v %v", errs, err)
	}
	if n := stored(t, c, url); n != 2 {
		t.Errorf("%d stored after sending job-1 three times and job-2 once, want 2", n)
	}
	errs, err := snd.SendBatch(ctx, []core.Outgoing{{Body: []byte("no group"), DedupID: "job-3"}})
	if err == nil {
		err = errs[0]
	}
	if core.ClassOf(err) != core.Fatal || errors.Is(err, core.ErrSendUnknown) {
		t.Errorf("a FIFO send without a group: %v, want a Fatal refusal", err)
	}
	got, err := c.ReceiveMessage(ctx, &awssqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	var groups []string
	for _, m := range got.Messages {
		groups = append(groups, aws.ToString(m.Body)+"/"+m.Attributes["MessageGroupId"]+"/"+m.Attributes["MessageDeduplicationId"])
	}
	if diff := cmp.Diff([]string{"job/key-a/job-1", "other/key-b/job-2"}, groups); diff != "" {
		t.Errorf("received body/group/dedup (-want +got):\n%s", diff)
	}
}
