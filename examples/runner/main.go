// Command runner runs a sluice runner on a directory: it enqueues jobs (generated with -n, or
// read from stdin with -stdin, one "<target> <payload>" per line), prints "ack <id>" once each
// enqueue is durable, runs a handler that appends "run <id> <attempt>" to a log file and fsyncs
// it, prints "settled <id> <state> <attempts>" once a terminal state is durable, and drains.
// With -dump it prints "job <id> <state> <attempts>" for every job instead.
//
// The kill -9 test in this directory builds it and kills it at random moments.
//
// Handler behaviour, by job id, so that retries and dead jobs happen on purpose:
// id%5 == 0 fails retryably on its first two attempts; id%11 == 0 fails permanently;
// id%13 == 0 panics; every handler first sleeps a random time up to -sleep.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluicehq/sluice"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "runner:", err)
		os.Exit(1)
	}
}

type options struct {
	dir, logPath string
	n, producers int
	stdin, dump  bool
	drain        bool
	sleep        time.Duration
	capacity     int
	attempts     int
	base         time.Duration
	compact      int64
	retention    int
	dieAfter     int
	verbose      bool
}

func run() error {
	var o options
	flag.StringVar(&o.dir, "dir", "", "runner directory (required)")
	flag.StringVar(&o.logPath, "log", "", "run log file (default <dir>/runs.log)")
	flag.IntVar(&o.n, "n", 0, "jobs to generate and enqueue")
	flag.IntVar(&o.producers, "producers", 8, "goroutines enqueueing generated jobs")
	flag.BoolVar(&o.stdin, "stdin", false, `read jobs from stdin, one "<target> <payload>" per line`)
	flag.BoolVar(&o.dump, "dump", false, "print every job and exit")
	flag.BoolVar(&o.drain, "drain", true, "run jobs until none is due, waiting or running, then exit")
	flag.DurationVar(&o.sleep, "sleep", 10*time.Millisecond, "longest handler sleep")
	flag.IntVar(&o.capacity, "capacity", 8, "attempts running at once")
	flag.IntVar(&o.attempts, "attempts", 5, "retry policy: attempts per job")
	flag.DurationVar(&o.base, "base", 5*time.Millisecond, "retry policy: first backoff")
	flag.Int64Var(&o.compact, "compact-bytes", 0, "compact after the journal grew this much (0: default)")
	flag.IntVar(&o.retention, "retention", 0, "terminal jobs kept at compaction (0: default 10,000)")
	flag.IntVar(&o.dieAfter, "die-after", 0, "SIGKILL this process right after printing this many lines (crash tests)")
	flag.BoolVar(&o.verbose, "v", false, "log at debug level to stderr")
	flag.Parse()
	if o.dir == "" {
		flag.Usage()
		os.Exit(2)
	}
	if o.logPath == "" {
		o.logPath = filepath.Join(o.dir, "runs.log")
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	out := &lineWriter{w: os.Stdout, dieAfter: o.dieAfter}
	runLog, err := os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer runLog.Close()

	cfg := sluice.Config{
		Capacity:     o.capacity,
		Grace:        time.Second,
		Policy:       sluice.Policy{Attempts: o.attempts, Base: o.base, Cap: 20 * o.base},
		Circuit:      sluice.Circuit{Threshold: 1000, Window: time.Second, Cooldown: 10 * time.Millisecond},
		CompactBytes: o.compact,
		Retention:    o.retention,
		Logger:       logger,
		OnSettled: func(s sluice.Settled) {
			out.printf("settled %d %s %d\n", s.ID, s.State, s.Attempts)
		},
	}
	r, err := sluice.Open(o.dir, cfg, sluice.JSON[string](), handler(runLog, o.sleep))
	if err != nil {
		return err
	}
	if o.dump {
		return dump(r, out)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Run jobs while enqueueing, so that a kill finds jobs in every state: Drain returns when
	// it finds nothing to do, so it is called again until the enqueues are over.
	var enqueued atomic.Bool
	drained := make(chan error, 1)
	if o.drain {
		go func() {
			for {
				last := enqueued.Load()
				if err := r.Drain(ctx); err != nil || last {
					drained <- err
					return
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	err = enqueue(ctx, r, o, out)
	enqueued.Store(true)
	if err != nil {
		_ = r.Close()
		return err
	}
	if o.drain {
		if err := <-drained; err != nil {
			_ = r.Close()
			return fmt.Errorf("drain: %w", err)
		}
		st, err := r.Stats(context.Background())
		if err != nil {
			_ = r.Close()
			return fmt.Errorf("stats: %w", err)
		}
		out.printf("drained commits=%d records=%d syncs=%d compactions=%d\n", st.Commits, st.Records, st.Syncs, st.Compactions)
	}
	return r.Close()
}

// handler logs each run durably before doing anything else, so the log holds every attempt
// that began.
func handler(runLog *os.File, sleep time.Duration) sluice.Handler[string] {
	var mu sync.Mutex
	return func(ctx context.Context, j sluice.Job[string]) error {
		mu.Lock()
		_, err := fmt.Fprintf(runLog, "run %d %d\n", j.ID, j.Attempt)
		if err == nil {
			err = runLog.Sync()
		}
		mu.Unlock()
		if err != nil {
			return fmt.Errorf("writing run log: %w", err)
		}
		if sleep > 0 {
			select {
			case <-time.After(rand.N(sleep)):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		switch {
		case j.ID%13 == 0:
			panic(fmt.Sprintf("job %d panics on purpose", j.ID))
		case j.ID%11 == 0:
			return sluice.Permanent(errors.New("permanent failure on purpose"))
		case j.ID%5 == 0 && j.Attempt <= 2:
			return errors.New("retryable failure on purpose")
		}
		return nil
	}
}

func enqueue(ctx context.Context, r *sluice.Kind[string], o options, out *lineWriter) error {
	type job struct{ target, payload string }
	jobs := make(chan job)
	var wg sync.WaitGroup
	errc := make(chan error, o.producers)
	for range max(1, o.producers) {
		wg.Go(func() {
			for j := range jobs {
				id, err := r.Enqueue(ctx, time.Time{}, j.target, j.payload)
				if err != nil {
					errc <- err
					return
				}
				out.printf("ack %d\n", id)
			}
		})
	}
	var feedErr error
	if o.stdin {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			target, payload, _ := strings.Cut(strings.TrimSpace(sc.Text()), " ")
			if target == "" {
				continue
			}
			jobs <- job{target, payload}
		}
		feedErr = sc.Err()
	}
	for i := range o.n {
		jobs <- job{fmt.Sprintf("target-%d", i%4), fmt.Sprintf("job %d", i)}
	}
	close(jobs)
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return fmt.Errorf("enqueue: %w", err)
	}
	return feedErr
}

func dump(r *sluice.Kind[string], out *lineWriter) error {
	ctx := context.Background()
	st, err := r.Stats(ctx)
	if err != nil {
		return err
	}
	for id := uint64(1); id <= st.LastID; id++ {
		j, err := r.Get(ctx, id)
		if errors.Is(err, sluice.ErrNotFound) {
			out.printf("job %d gone 0\n", id)
			continue
		}
		if err != nil {
			return err
		}
		out.printf("job %d %s %d\n", id, j.State, j.Attempts)
	}
	return r.Close()
}

// lineWriter writes whole lines with one write call each, so a reader of the pipe never sees
// a line interleaved with another; a SIGKILL can only cut the stream between lines.
//
// With dieAfter > 0 the process kills itself with SIGKILL right after the dieAfter-th line:
// a crash at an exact point (just after an acknowledgement reached the reader), which a kill
// from outside, arriving only after the reader saw the line, cannot hit.
type lineWriter struct {
	mu       sync.Mutex
	w        io.Writer
	n        int
	dieAfter int
}

func (l *lineWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
	l.n++
	if l.n == l.dieAfter {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way; print nothing more
	}
}
