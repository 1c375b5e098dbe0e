// Package webhook delivers "order paid" webhooks with a sluice runner: one job per delivery,
// retried until the receiver accepts it. Its test, with sluicetest, shows why the handler must
// send an idempotency key: a receiver that applied a delivery and then failed to answer (or a
// crash between the POST and the journaled success) makes the runner deliver it again.
package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/sluicehq/sluice"
)

// Delivery is one webhook to deliver.
type Delivery struct {
	Order string `json:"order"` // the order the event is about
	Event string `json:"event"` // e.g. "order.paid"
}

// Receiver is the webhook receiver as the handler sees it. Production uses HTTPReceiver; the
// test an adapter over a sluicetest.Service.
type Receiver interface {
	// Post delivers body for order; idempotencyKey, when not empty, lets the receiver drop a
	// delivery it has already applied.
	Post(ctx context.Context, order, body, idempotencyKey string) error
}

// NaiveHandler posts without an idempotency key. It is wrong: a delivery applied by the
// receiver whose answer is lost (a timeout, a 502 after the write, a crash of this process
// before the success is journaled) is delivered again on the retry.
func NaiveHandler(r Receiver) sluice.Handler[Delivery] {
	return func(ctx context.Context, j sluice.Job[Delivery]) error {
		return r.Post(ctx, j.Payload.Order, j.Payload.Event, "")
	}
}

// Handler posts with an idempotency key naming the event, so the receiver applies each event
// once however often it is delivered.
func Handler(r Receiver) sluice.Handler[Delivery] {
	return func(ctx context.Context, j sluice.Job[Delivery]) error {
		key := j.Payload.Order + "/" + j.Payload.Event
		return r.Post(ctx, j.Payload.Order, j.Payload.Event, key)
	}
}

// HTTPReceiver posts to a URL with the key in an Idempotency-Key header.
type HTTPReceiver struct {
	URL    string
	Client *http.Client
}

// Post implements Receiver.
func (h HTTPReceiver) Post(ctx context.Context, order, body, idempotencyKey string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewBufferString(body))
	if err != nil {
		return sluice.Permanent(err)
	}
	req.Header.Set("X-Order", order)
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode < 300:
		return nil
	case resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return sluice.Permanent(fmt.Errorf("webhook: %s answered %s", h.URL, resp.Status))
	}
	return fmt.Errorf("webhook: %s answered %s", h.URL, resp.Status)
}
