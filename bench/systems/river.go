// Package systems holds the baselines (River on SQLite and PostgreSQL, goqite
// on SQLite) behind harness.System, and the private PostgreSQL cluster.
package systems

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	_ "modernc.org/sqlite" // registers "sqlite"

	"github.com/sluicehq/sluice/bench/harness"
)

// River settings shared by both drivers. FetchCooldown's default (100 ms)
// caps throughput at ~80 jobs/s for 8 workers whatever the database, so it is
// set to River's minimum for a fair comparison. FetchPollInterval matters
// only for jobs that become due later (the retry workload); new inserts wake
// the producer directly.
const (
	RiverFetchCooldown     = time.Millisecond
	RiverFetchPollInterval = 5 * time.Millisecond
	RetryBackoff           = time.Millisecond
)

type noopArgs struct {
	S int64 `json:"s"`
	T int64 `json:"t"`
	F int   `json:"f,omitempty"`
}

func (noopArgs) Kind() string { return "noop" }

type retryPolicy struct{}

func (retryPolicy) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(RetryBackoff) }

// SQLiteDSN is the durable SQLite configuration used by every SQLite baseline.
func SQLiteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)&_txlock=immediate"
}

const sqliteSettings = "SQLite (modernc.org/sqlite): journal_mode=WAL, synchronous=FULL, busy_timeout=10s, one open connection"

func openSQLite(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	var mode string
	var sync int
	if err := db.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil {
		db.Close()
		return nil, fmt.Errorf("read journal_mode: %w", err)
	}
	if err := db.QueryRow("PRAGMA synchronous").Scan(&sync); err != nil {
		db.Close()
		return nil, fmt.Errorf("read synchronous: %w", err)
	}
	if mode != "wal" || sync != 2 {
		db.Close()
		return nil, fmt.Errorf("sqlite pragmas not applied: journal_mode=%s synchronous=%d", mode, sync)
	}
	return db, nil
}

// RiverSQLite is River over riversqlite.
type RiverSQLite struct{}

func (RiverSQLite) Name() string { return "river-sqlite" }
func (RiverSQLite) Settings() []string {
	return []string{
		"River v0.51.2, riversqlite driver; " + sqliteSettings,
		fmt.Sprintf("River FetchCooldown=%s (default 100ms), FetchPollInterval=%s, retry backoff %s, completer per River default", RiverFetchCooldown, RiverFetchPollInterval, RetryBackoff),
	}
}

func (RiverSQLite) Open(ctx context.Context, dir string, workers int, h harness.Handler) (harness.Instance, error) {
	db, err := openSQLite(filepath.Join(dir, "river.db"))
	if err != nil {
		return nil, err
	}
	driver := riversqlite.New(db)
	if err := migrate(ctx, driver); err != nil {
		db.Close()
		return nil, err
	}
	inst, err := newRiver(driver, workers, h)
	if err != nil {
		db.Close()
		return nil, err
	}
	inst.cleanup = func() { db.Close() }
	return inst, nil
}

func migrate[TTx any](ctx context.Context, driver riverdriver.Driver[TTx]) error {
	m, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	return nil
}

type riverInst[TTx any] struct {
	client    *river.Client[TTx]
	events    <-chan *river.Event
	unsub     func()
	completed atomic.Int64
	mu        sync.Mutex
	cleanup   func()
	started   bool
	drainDone chan struct{}
}

func newRiver[TTx any](driver riverdriver.Driver[TTx], workers int, h harness.Handler) (*riverInst[TTx], error) {
	ws := river.NewWorkers()
	river.AddWorker(ws, river.WorkFunc(func(ctx context.Context, j *river.Job[noopArgs]) error {
		return h(ctx, harness.Payload{Seq: j.Args.S, T: j.Args.T, Fail: j.Args.F})
	}))
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     RiverFetchCooldown,
		FetchPollInterval: RiverFetchPollInterval,
		Logger:            slog.New(slog.DiscardHandler),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		RetryPolicy:       retryPolicy{},
		Workers:           ws,
	})
	if err != nil {
		return nil, fmt.Errorf("river client: %w", err)
	}
	r := &riverInst[TTx]{client: client, drainDone: make(chan struct{})}
	// Completion events are sent after the completer has written the state.
	r.events, r.unsub = client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 1 << 20, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	go func() {
		defer close(r.drainDone)
		for range r.events {
			r.completed.Add(1)
		}
	}()
	return r, nil
}

func (r *riverInst[TTx]) Enqueue(ctx context.Context, p harness.Payload) error {
	_, err := r.client.Insert(ctx, noopArgs{S: p.Seq, T: p.T, F: p.Fail}, nil)
	return err
}

func (r *riverInst[TTx]) EnqueueBatch(ctx context.Context, ps []harness.Payload) error {
	params := make([]river.InsertManyParams, len(ps))
	for i, p := range ps {
		params[i] = river.InsertManyParams{Args: noopArgs{S: p.Seq, T: p.T, F: p.Fail}}
	}
	_, err := r.client.InsertMany(ctx, params)
	return err
}

func (r *riverInst[TTx]) StartWorkers(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.client.Start(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	r.started = true
	return nil
}

func (r *riverInst[TTx]) WaitCompleted(ctx context.Context, n int) error {
	return waitFor(ctx, func() bool { return r.completed.Load() >= int64(n) })
}

func (r *riverInst[TTx]) Close(ctx context.Context) error {
	r.mu.Lock()
	started := r.started
	r.mu.Unlock()
	var err error
	if started {
		err = r.client.Stop(ctx)
	}
	r.unsub()
	if r.cleanup != nil {
		r.cleanup()
	}
	return err
}

// waitFor polls cond every 200µs until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(200 * time.Microsecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// RiverPG is River over riverpgxv5 on the private cluster.
type RiverPG struct {
	Cluster *PGCluster
	seq     atomic.Int64
}

func (*RiverPG) Name() string { return "river-pg" }
func (s *RiverPG) Settings() []string {
	return []string{
		"River v0.51.2, riverpgxv5 driver, pgxpool MaxConns=16; " + s.Cluster.Describe(),
		fmt.Sprintf("River FetchCooldown=%s (default 100ms), FetchPollInterval=%s, retry backoff %s", RiverFetchCooldown, RiverFetchPollInterval, RetryBackoff),
	}
}

func (s *RiverPG) Open(ctx context.Context, dir string, workers int, h harness.Handler) (harness.Instance, error) {
	name := fmt.Sprintf("bench_%d", s.seq.Add(1))
	if err := s.Cluster.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.Cluster.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	cfg, err := pgxpool.ParseConfig(s.Cluster.URL(name))
	if err != nil {
		drop()
		return nil, err
	}
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, err
	}
	driver := riverpgxv5.New(pool)
	if err := migrate(ctx, driver); err != nil {
		pool.Close()
		drop()
		return nil, err
	}
	inst, err := newRiver(driver, workers, h)
	if err != nil {
		pool.Close()
		drop()
		return nil, err
	}
	inst.cleanup = func() { pool.Close(); drop() }
	return inst, nil
}
