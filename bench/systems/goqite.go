package systems

import (
	"context"
	"database/sql"
	_ "embed"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"maragu.dev/goqite"
	"maragu.dev/goqite/jobs"

	"github.com/sluicehq/sluice/bench/harness"
)

// goqite_schema_sqlite.sql is schema_sqlite.sql from the goqite v0.4.0 module root.
//
//go:embed goqite_schema_sqlite.sql
var goqiteSchema string

// goqite's runner leaves a failed message alone; it becomes receivable again
// when its timeout lapses, so the queue Timeout is also the retry delay.
const (
	GoqitePollInterval = time.Millisecond
	GoqiteTimeout      = 100 * time.Millisecond
	GoqiteMaxReceive   = 10
)

// Goqite is goqite's jobs.Runner over SQLite.
type Goqite struct{}

func (Goqite) Name() string { return "goqite-sqlite" }
func (Goqite) Settings() []string {
	return []string{
		"goqite v0.4.0 jobs.Runner; " + sqliteSettings,
		fmt.Sprintf("goqite PollInterval=%s (default 100ms), queue Timeout=%s (= its retry delay), Extend=%s, MaxReceive=%d, batch = one transaction of CreateTx calls",
			GoqitePollInterval, GoqiteTimeout, GoqiteTimeout, GoqiteMaxReceive),
	}
}

type goqiteInst struct {
	db        *sql.DB
	q         *goqite.Queue
	r         *jobs.Runner
	succeeded atomic.Int64
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

func encodeBody(p harness.Payload) []byte {
	b := make([]byte, 17)
	binary.LittleEndian.PutUint64(b, uint64(p.Seq))
	binary.LittleEndian.PutUint64(b[8:], uint64(p.T))
	b[16] = byte(p.Fail)
	return b
}

func (Goqite) Open(ctx context.Context, dir string, workers int, h harness.Handler) (harness.Instance, error) {
	db, err := openSQLite(filepath.Join(dir, "goqite.db"))
	if err != nil {
		return nil, err
	}
	if _, err := db.ExecContext(ctx, goqiteSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("goqite schema: %w", err)
	}
	g := &goqiteInst{db: db}
	g.q = goqite.New(goqite.NewOpts{DB: db, Name: "jobs", Timeout: GoqiteTimeout, MaxReceive: GoqiteMaxReceive})
	g.r = jobs.NewRunner(jobs.NewRunnerOpts{Limit: workers, PollInterval: GoqitePollInterval, Queue: g.q, Extend: GoqiteTimeout})
	g.r.Register("noop", func(ctx context.Context, m []byte) error {
		p := harness.Payload{
			Seq:  int64(binary.LittleEndian.Uint64(m)),
			T:    int64(binary.LittleEndian.Uint64(m[8:])),
			Fail: int(m[16]),
		}
		err := h(ctx, p)
		if err == nil {
			g.succeeded.Add(1)
		}
		return err
	})
	return g, nil
}

func (g *goqiteInst) Enqueue(ctx context.Context, p harness.Payload) error {
	_, err := jobs.Create(ctx, g.q, "noop", goqite.Message{Body: encodeBody(p)})
	return err
}

func (g *goqiteInst) EnqueueBatch(ctx context.Context, ps []harness.Payload) error {
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if _, err := jobs.CreateTx(ctx, tx, g.q, "noop", goqite.Message{Body: encodeBody(p)}); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

func (g *goqiteInst) StartWorkers(ctx context.Context) error {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	g.cancel = cancel
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		g.r.Start(rctx)
	}()
	return nil
}

// WaitCompleted waits for n successful handler runs, then for the queue table
// to be empty: a message is done for goqite once its delete has committed.
func (g *goqiteInst) WaitCompleted(ctx context.Context, n int) error {
	if err := waitFor(ctx, func() bool { return g.succeeded.Load() >= int64(n) }); err != nil {
		return err
	}
	for {
		var left int
		if err := g.db.QueryRowContext(ctx, "select count(*) from goqite").Scan(&left); err != nil {
			return err
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d messages left: %w", left, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

func (g *goqiteInst) Close(ctx context.Context) error {
	if g.cancel != nil {
		g.cancel()
		g.wg.Wait()
	}
	return g.db.Close()
}
