package sluice

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestWorkerShutdownLogsOneInfoLine: a worker stopped while its long poll waits on an empty
// queue logs the shutdown once at Info; the receive it cancels on the way is a detail of that
// event (Debug).
func TestWorkerShutdownLogsOneInfoLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs syncBuffer
		logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
		_, cancel, wait := startWorker(t, newMemQueue(), WorkerConfig{Window: 30 * time.Second, Logger: logger},
			func(context.Context, Message) Result { return Ack() })
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
