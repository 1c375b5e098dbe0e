package webhook

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
)

// TestHTTPReceiverSendsTheKeyAndClassifiesStatuses: the production Receiver sends the
// idempotency key as a header, and maps statuses to outcomes: 2xx succeeds, 4xx (but 429) is
// permanent, 429 and 5xx are retried.
func TestHTTPReceiverSendsTheKeyAndClassifiesStatuses(t *testing.T) {
	type got struct {
		Key     string
		Order   string
		Outcome string
	}
	for _, tc := range []struct {
		status int
		want   got
	}{
		{http.StatusOK, got{Key: "order-1/order.paid", Order: "order-1", Outcome: "succeeded"}},
		{http.StatusBadRequest, got{Key: "order-1/order.paid", Order: "order-1", Outcome: "permanent"}},
		{http.StatusTooManyRequests, got{Key: "order-1/order.paid", Order: "order-1", Outcome: "retry"}},
		{http.StatusBadGateway, got{Key: "order-1/order.paid", Order: "order-1", Outcome: "retry"}},
	} {
		var g got
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g.Key, g.Order = r.Header.Get("Idempotency-Key"), r.Header.Get("X-Order")
			w.WriteHeader(tc.status)
		}))
		h := Handler(HTTPReceiver{URL: srv.URL, Client: srv.Client()})
		out := h(context.Background(), sluice.Job[Delivery]{ID: 1, Attempt: 1, Payload: Delivery{Order: "order-1", Event: "order.paid"}})
		srv.Close()
		g.Outcome = sluice.OutcomeName(out)
		if diff := cmp.Diff(tc.want, g); diff != "" {
			t.Errorf("status %d (-want +got):\n%s", tc.status, diff)
		}
	}
}

func TestHTTPReceiverConnectionErrorIsRetried(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	err := HTTPReceiver{URL: url, Client: http.DefaultClient}.Post(context.Background(), "o", "b", "k")
	var pe *sluice.PermanentError
	if err == nil || errors.As(err, &pe) {
		t.Fatalf("a refused connection gave %v, want a retryable error", err)
	}
}
