// Command service is a whole service built on sluice's local runner: two kinds of job on one
// journal, an HTTP API that enqueues them, the web UI behind authorization, Prometheus metrics
// through OpenTelemetry, and a graceful stop on SIGTERM (running attempts get their grace, the
// journal is closed with its clean-close mark).
//
//	SLUICE_OPS_TOKEN=secret go run ./examples/service -dir /tmp/jobs -addr 127.0.0.1:8080
//	curl -X POST 'http://127.0.0.1:8080/signup?email=ada@example.com'
//	curl -H 'Authorization: Bearer secret' http://127.0.0.1:8080/ops/jobs/
//	curl http://127.0.0.1:8080/metrics
//
// docs/concepts.md shows its parts; main_test.go runs it.
package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/sluicehq/sluice"
	sluiceotel "github.com/sluicehq/sluice/adapters/otel"
	"github.com/sluicehq/sluice/sluiceui"
)

// Welcome is the email kind's payload.
type Welcome struct {
	To string `json:"to"`
}

// Thumbnail is the resize kind's payload.
type Thumbnail struct {
	Image string `json:"image"`
	Width int    `json:"width"`
}

// options are the command line's settings.
type options struct {
	dir, addr, token string
	ready            func(addr string) // called once the listener is bound (tests)
}

func main() {
	var o options
	flag.StringVar(&o.dir, "dir", "", "the runner's directory (required)")
	flag.StringVar(&o.addr, "addr", "127.0.0.1:8080", "the HTTP address to listen on")
	flag.Parse()
	o.token = os.Getenv("SLUICE_OPS_TOKEN")
	if o.dir == "" {
		fmt.Fprintln(os.Stderr, "service: -dir is required: the directory that holds the journal")
		os.Exit(2)
	}
	// SIGTERM (a deploy) and SIGINT end ctx: Run then stops gracefully and closes the journal.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		log.Fatal(err)
	}
}

// run serves until ctx ends, then stops the HTTP server and the runner.
func run(ctx context.Context, o options) error {
	// service:begin
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	in, err := sluiceotel.New(sluiceotel.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))})
	if err != nil {
		return err
	}
	r, err := sluice.New(o.dir, in.Runner(sluice.Config{Capacity: 8, Grace: 5 * time.Second}))
	if err != nil {
		return err
	}
	defer r.Close()
	emails, err := sluice.Register(r, "email", sluice.JSON[Welcome](), sendWelcome)
	if err != nil {
		return err
	}
	if _, err := sluice.Register(r, "resize", sluice.JSON[Thumbnail](), resize, sluice.WithConcurrency(2)); err != nil {
		return err
	}
	stats, err := in.ObserveRunner(r.Stats)
	if err != nil {
		return err
	}
	defer stats.Unregister()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /signup", func(w http.ResponseWriter, req *http.Request) {
		to := req.FormValue("email")
		// One welcome per address a year: a retried request finds the first job, also after it ran.
		id, err := emails.Enqueue(req.Context(), time.Time{}, "smtp", Welcome{To: to},
			sluice.WithUnique("welcome:"+to), sluice.WithUniqueWindow(365*24*time.Hour))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "job %d\n", id) // the job is durable: Enqueue returned after its fsync
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ui := sluiceui.New(sluiceui.FromRunner(r), sluiceui.Options{Authorize: bearer(o.token)})
	mux.Handle("/ops/jobs/", http.StripPrefix("/ops/jobs", ui))
	// service:end
	return serve(ctx, o, mux, r)
}

// serve listens on o.addr and runs the runner beside the HTTP server until ctx ends; then it
// shuts the server down first (no new jobs), and waits for Run's graceful stop.
func serve(ctx context.Context, o options, h http.Handler, r *sluice.Runner) error {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if o.ready != nil {
		o.ready(ln.Addr().String())
	}
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	<-ctx.Done()
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(shut)
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	if rerr := <-ran; rerr != nil && !errors.Is(rerr, context.Canceled) && err == nil {
		err = rerr
	}
	return err
}

// bearer authorizes every UI request, views and actions alike, by a shared token; with no
// token configured it refuses everything, so an unset variable never opens the UI.
func bearer(token string) func(*http.Request, sluiceui.Action) error {
	return func(req *http.Request, _ sluiceui.Action) error {
		got := req.Header.Get("Authorization")
		if token == "" || subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+token)) != 1 {
			return errors.New("service: send Authorization: Bearer $SLUICE_OPS_TOKEN")
		}
		return nil
	}
}

func sendWelcome(ctx context.Context, j sluice.Job[Welcome]) error {
	slog.InfoContext(ctx, "sending welcome", "to", j.Payload.To, "job", j.ID)
	return nil
}

func resize(ctx context.Context, j sluice.Job[Thumbnail]) error {
	if j.Payload.Width <= 0 {
		return sluice.Permanent(fmt.Errorf("resize %s: width %d", j.Payload.Image, j.Payload.Width))
	}
	return nil
}
