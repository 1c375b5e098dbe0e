package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/internal/runneropt"
	"github.com/sluicehq/sluice/sim/disk"
)

// TestWorkerShutdownLogsOneInfoLine: a worker stopped while its long poll waits on an empty
// queue logs the shutdown once at Info; the receive it cancels on the way is a detail of that
// event (Debug).
func TestWorkerShutdownLogsOneInfoLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		_, cancel, wait := startWorker(t, newMemQueue(), WorkerConfig{Window: 30 * time.Second, Logger: logger},
			func(context.Context, Message) error { return nil })
		time.Sleep(time.Second) // the long poll is waiting
		cancel()
		wait()
		settle()
		var info []string
		for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			if strings.Contains(l, "level=INFO") {
				info = append(info, l)
			}
		}
		if len(info) != 1 || !strings.Contains(info[0], `msg="worker: shutting down"`) {
			t.Errorf("Info lines of one shutdown:\n%s\nwant one, \"worker: shutting down\"", strings.Join(info, "\n"))
		}
	})
}

// TestDeadJobAndCrashRecoveryLogAtWarn: a job going dead on the local runner logs one Warn line
// naming it and why; an open that finds an attempt a crash interrupted says how many jobs
// went dead and how many wait again (with Attempts 1 the interrupted job is dead, which the
// line used to call "requeued").
func TestDeadJobAndCrashRecoveryLogAtWarn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		d := disk.New(1)
		cfg := Config{Capacity: 1, Policy: Policy{Attempts: 1}, Logger: logger}
		ctx := context.Background()
		openOn := func(t *testing.T, fsys core.FS, cfg Config, h Handler[string]) *Kind[string] {
			t.Helper()
			cfg.opts = runneropt.Options{FS: fsys}
			k, err := Open("", cfg, JSON[string](), h)
			if err != nil {
				t.Fatal(err)
			}
			return k
		}
		k := openOn(t, d, cfg, func(context.Context, Job[string]) error {
			return Permanent(errors.New("smtp 550"))
		})
		id, _ := k.Enqueue(ctx, time.Time{}, "a", "x")
		if err := k.DrainDue(ctx); err != nil {
			t.Fatal(err)
		}
		_ = k.Close()
		want := fmt.Sprintf(`level=WARN msg="sluice: job dead; it waits for a Retry or a Cancel (sluice show, the UI)" job=%d reason=permanent attempts=1 err="smtp 550"`, id)
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}

		started, finish := make(chan struct{}), make(chan struct{})
		old := openOn(t, d, cfg, func(context.Context, Job[string]) error {
			close(started)
			<-finish
			return nil
		})
		_, _ = old.Enqueue(ctx, time.Time{}, "a", "y")
		go func() { _ = old.Drain(ctx) }()
		<-started
		synctest.Wait()
		d.Crash()
		r := openOn(t, d, cfg, succeedString)
		want = `level=WARN msg="runner: attempts a crash interrupted were recorded as failed: jobs with attempts left wait again, the others are dead" jobs=1 requeued=0 dead=1`
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
		_ = r.Close()
		close(finish)
		_ = old.Close()
	})
}
