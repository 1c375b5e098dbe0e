package systems

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/runneropt"

	"github.com/sluicehq/sluice/bench/harness"
)

// Sluice is the root package's durable runner. GroupCommit=false sets
// the internal SyncEveryRecord option (one commit, so one fsync, per command and outcome).
type Sluice struct {
	GroupCommit bool
}

func (s Sluice) Name() string {
	if s.GroupCommit {
		return "sluice-group"
	}
	return "sluice-fsync1"
}

// The breaker is a sluice feature the baselines do not have; it is made
// inert (a failure only counts within 1 ms, and it takes 2^30 to open) so the
// retry workload measures retries, not cooldowns.
var sluicePolicy = sluice.Policy{Attempts: 5, Base: RetryBackoff, Cap: RetryBackoff}
var sluiceCircuit = sluice.Circuit{Threshold: 1 << 30, Window: time.Millisecond, Cooldown: time.Millisecond, Probes: 1}

func (s Sluice) Settings() []string {
	mode := "group commit (records arriving during a sync share the next one)"
	if !s.GroupCommit {
		mode = "the internal SyncEveryRecord option (one commit and fsync per command and per outcome)"
	}
	return []string{
		"sluice root package, journal on the scratch disk via adapters for os; " + mode,
		fmt.Sprintf("Capacity=workers, Policy{Attempts 5, Base %s, Cap %s} (equal jitter: waits %s..%s), breaker inert, binary 17-byte payload codec; a batch = one EnqueueMany call (one record batch, one fsync)",
			RetryBackoff, RetryBackoff, RetryBackoff/2, RetryBackoff),
	}
}

var zeroTime time.Time // due now

type payloadCodec struct{}

func (payloadCodec) Encode(p harness.Payload) ([]byte, error) { return encodeBody(p), nil }
func (payloadCodec) Decode(b []byte) (harness.Payload, error) {
	if len(b) != 17 {
		return harness.Payload{}, fmt.Errorf("payload of %d bytes, want 17", len(b))
	}
	return harness.Payload{
		Seq:  int64(binary.LittleEndian.Uint64(b)),
		T:    int64(binary.LittleEndian.Uint64(b[8:])),
		Fail: int(b[16]),
	}, nil
}

type sluiceInst struct {
	r         *sluice.Kind[harness.Payload]
	succeeded atomic.Int64
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	runErr    error
}

func (s Sluice) Open(ctx context.Context, dir string, workers int, h harness.Handler) (harness.Instance, error) {
	si := &sluiceInst{}
	cfg := sluice.Config{
		Capacity: workers,
		Policy:   sluicePolicy,
		Circuit:  sluiceCircuit,
		Logger:   slog.New(slog.DiscardHandler),
		OnSettled: func(st sluice.Settled) {
			if st.State == sluice.StateSucceeded {
				si.succeeded.Add(1)
			}
		},
	}
	// The baseline without group commit is an internal option, not part of sluice.Config.
	sluice.SetInternalOptions(&cfg, runneropt.Options{SyncEveryRecord: !s.GroupCommit})
	r, err := sluice.Open(dir, cfg, sluice.Codec[harness.Payload](payloadCodec{}),
		func(ctx context.Context, j sluice.Job[harness.Payload]) error {
			return h(ctx, j.Payload)
		})
	if err != nil {
		return nil, err
	}
	si.r = r
	return si, nil
}

func (si *sluiceInst) Enqueue(ctx context.Context, p harness.Payload) error {
	_, err := si.r.Enqueue(ctx, zeroTime, "bench", p)
	return err
}

// EnqueueBatch is one EnqueueMany call: one record batch, one fsync, as the baselines insert
// a batch in one transaction.
func (si *sluiceInst) EnqueueBatch(ctx context.Context, ps []harness.Payload) error {
	jobs := make([]sluice.NewJob[harness.Payload], len(ps))
	for i, p := range ps {
		jobs[i] = sluice.NewJob[harness.Payload]{Target: "bench", Payload: p}
	}
	_, err := si.r.EnqueueMany(ctx, jobs)
	return err
}

func (si *sluiceInst) StartWorkers(ctx context.Context) error {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	si.cancel = cancel
	si.wg.Add(1)
	go func() {
		defer si.wg.Done()
		si.runErr = si.r.Run(rctx)
	}()
	return nil
}

func (si *sluiceInst) WaitCompleted(ctx context.Context, n int) error {
	return waitFor(ctx, func() bool { return si.succeeded.Load() >= int64(n) })
}

func (si *sluiceInst) Syncs() int64 {
	st, err := si.r.Stats(context.Background())
	if err != nil { // with a live context only a zero runner fails, and this one is made by Open
		panic(err)
	}
	return st.Syncs
}

func (si *sluiceInst) Close(ctx context.Context) error {
	if si.cancel != nil {
		si.cancel()
		si.wg.Wait()
	}
	err := si.r.Close()
	if si.runErr != nil {
		return si.runErr
	}
	return err
}
