// Package docsnippets holds the Go blocks of docs/ as code that `go test ./...` compiles:
// each sits between "// NAME:begin" and "// NAME:end" lines, and examples/quickstart's
// readme_test.go checks that the page shows it byte for byte. Nothing here runs; the
// functions only give each block the names it uses.
package docsnippets

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/otel"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/examples/webhook"
	"github.com/sluicehq/sluice/sluicetest"
	"github.com/sluicehq/sluice/sluiceui"
)

// Email is the docs' payload.
type Email struct{ To, Subject string }

func alert(id uint64, target, err string) { fmt.Println("dead:", id, target, err) }

func isAdmin(*http.Request) bool { return false }

func sendEmail(context.Context, sluice.Job[Email]) error { return nil }

// hooks is docs/observability.md's hook.
func hooks() sluice.Config {
	// hooks:begin
	cfg := sluice.Config{
		OnAttemptEnded: func(e sluice.AttemptEnded) {
			if e.Next == sluice.StateDead {
				alert(e.ID, e.Target, e.Err)
			}
		},
	}
	// hooks:end
	return cfg
}

// instrument is docs/observability.md's OpenTelemetry block.
func instrument(dir string, cfg sluice.Config, codec sluice.Codec[Email], handler sluice.Handler[Email]) error {
	// otel:begin
	in, err := otel.New(otel.Options{}) // the global MeterProvider and TracerProvider, or give yours
	cfg = in.Runner(cfg)                // hooks and middleware added; cfg's own hooks kept, called first
	r, err := sluice.Open(dir, cfg, codec, handler)
	reg, err := in.ObserveRunner(r.Stats) // jobs by state, read at each collection
	// and for a worker: wcfg = in.Worker(wcfg); in.ObserveWorker(w.Stats)
	// otel:end
	_ = reg
	return err
}

// mount is docs/operating.md's web UI block.
func mount(dir string, cfg sluice.Config, handler sluice.Handler[Email], mux *http.ServeMux) error {
	// ui:begin
	codec := sluice.JSON[Email]()
	r, err := sluice.Open(dir, cfg, codec, handler)
	// ...
	ui := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{
		Authorize: func(req *http.Request, a sluiceui.Action) error {
			if a == sluiceui.ActionView || isAdmin(req) {
				return nil
			}
			return errors.New("only admins may retry or cancel jobs")
		},
	})
	mux.Handle("/ops/jobs/", http.StripPrefix("/ops/jobs", ui))
	// ui:end
	return err
}

// local and onSQS are docs/queue.md's two constructions; rest is what both share.
func local(dir string, policy sluice.Policy, circuit sluice.Circuit) (*sluice.Runner, error) {
	// local:begin
	// local
	r, err := sluice.New(dir, sluice.Config{Policy: policy, Circuit: circuit})
	// local:end
	return r, err
}

func onSQS(client *awssqs.Client, url, dlqURL string, policy sluice.Policy, circuit sluice.Circuit) (*sluice.QueueRunner, error) {
	// sqs:begin
	// on SQS
	t, _ := sqs.New(client, sqs.Config{QueueURL: url})
	send, _ := sqs.NewSender(client, sqs.Config{QueueURL: url})
	dead, _ := sqs.NewSender(client, sqs.Config{QueueURL: dlqURL})
	r, err := sluice.NewQueueRunner(sluice.Queue{Transport: t, Send: send, DeadLetter: dead},
		sluice.QueueConfig{Policy: policy, Circuit: circuit})
	// sqs:end
	return r, err
}

func rest(ctx context.Context, r interface {
	sluice.Registrar
	Run(context.Context) error
}) error {
	// rest:begin
	emails, err := sluice.Register(r, "email", sluice.JSON[Email](), sendEmail) // unchanged
	_, err = emails.Enqueue(ctx, time.Time{}, "smtp.example.com", Email{To: "ada@example.com"})
	err = r.Run(ctx)
	// rest:end
	return err
}

// The names docs/testing.md's scenario uses, from examples/webhook.
type (
	Delivery    = webhook.Delivery
	simReceiver struct{ svc *sluicetest.Service }
)

var Handler = webhook.Handler

func (s simReceiver) Post(ctx context.Context, order, body, key string) error {
	_, err := s.svc.Do(ctx, sluicetest.Request{Op: "post", Key: order, Value: body, IdempotencyKey: key})
	return err
}

// scenario:begin
func TestWebhookDeliveredOnce(t *testing.T) {
	sluicetest.Check(t, sluicetest.Scenario[Delivery]{
		Config: sluice.Config{Capacity: 4, Policy: sluice.Policy{Attempts: 10}}, // production's
		Setup: func(env *sluicetest.Env) sluice.Handler[Delivery] {
			svc := env.Service("receiver", sluicetest.ServiceFaults{Fail: 0.05, ApplyThenFail: 0.02, Timeout: 0.02})
			return Handler(simReceiver{svc}) // production's handler over a simulated client
		},
		Workload: func(r *rand.Rand, p *sluicetest.Plan[Delivery]) {
			for i := range 1 + r.Intn(8) {
				p.Enqueue(time.Duration(r.Int63n(int64(10*time.Second))), "hooks", Delivery{Order: fmt.Sprint(i)})
			}
		},
		Invariants: []sluicetest.Invariant[Delivery]{
			sluicetest.ExactlyOnce("receiver", func(d Delivery) string { return d.Order }),
		},
	}, sluicetest.Seeds(500), sluicetest.Corpus("testdata/sluicetest.corpus"))
}

// scenario:end
