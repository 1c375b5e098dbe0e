package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/retry"
)

// Defaults of Config: the one table (the root package's defaults are these).
const (
	CompactBytesDefault = 64 << 20
	RetentionDefault    = 10_000
	GraceDefault        = 10 * time.Second
	AgeMaxDefault       = time.Minute
	// errMax bounds the error text journaled per outcome, so a Finished record always fits.
	errMax = 4 << 10
	// recordOverheadMax bounds a Finished record's bytes besides its error text.
	recordOverheadMax = 64
)

// ErrInvalidConfig is wrapped by every Config error; the message names the field.
var ErrInvalidConfig = errors.New("runner: invalid config")

// ErrPoisoned is wrapped by every call after a journal write, sync or compaction failed; the
// engine must be dropped and reopened (reopen re-reads the disk, which is the truth).
var ErrPoisoned = errors.New("runner: poisoned, reopen")

// Config configures an Engine. Zero fields take their defaults except Capacity.
type Config struct {
	Policy  retry.Policy    // zero fields: retry.DefaultPolicy()'s (Deadline 0 means none)
	Circuit breaker.Circuit // zero fields: breaker.DefaultCircuit()'s
	// Capacity is the pool size, required (≥ 1). core may not read the CPU count: the
	// production driver defaults it to runtime.NumCPU().
	Capacity     int
	CompactBytes int64 // compact when the journal grew by more; 0: 64 MiB
	Retention    int   // terminal jobs kept at compaction; 0: 10,000
	RecordMax    int   // largest record; 0: 1 MiB (journal's default)
	SnapshotMax  int   // largest snapshot; 0: 256 MiB
	// PreallocBytes is how far ahead the journal file is extended with zeros, so that
	// batches overwrite space it has (journal.Config.PreallocBytes); 0: 1 MiB; negative: off.
	PreallocBytes int64
	// Grace is how long a graceful stop waits for running attempts before cancelling them,
	// and again for the cancelled ones before abandoning them; 0: 10s.
	Grace  time.Duration
	Logger *slog.Logger // nil: discard
	Rand   *rand.Rand   // jitter draws; nil: rand.New(rand.NewSource(1))
	// Decode is the decode-check port (MachineConfig.Decode); nil: none.
	Decode func(payload []byte) (any, error)
	// AgeMax is the starvation rule (MachineConfig.AgeMax): a job due for AgeMax starts before
	// higher priorities; 0: 1 minute.
	AgeMax time.Duration
	// Kinds and KindsOnly: the registered kinds (MachineConfig.Kinds, KindsOnly); Register
	// adds more before the first Dispatch.
	Kinds     []KindConfig
	KindsOnly bool
	// Defect plants a known flow-control bug (MachineConfig.Defect); zero in production.
	Defect Defect
}

// ConfigError names the field of Config that WithDefaults refused (Policy and Circuit fields
// as "Policy.Base", "Circuit.Probes"); it wraps ErrInvalidConfig.
type ConfigError = core.FieldError

// configErr refuses field of Config (the error wraps ErrInvalidConfig).
func configErr(field string, value any, rule string) error {
	return &ConfigError{Err: ErrInvalidConfig, Field: field, Value: value, Rule: rule}
}

// WithDefaults returns c with zero fields defaulted (the one table: the constants above,
// retry.DefaultPolicy, breaker.DefaultCircuit, journal's limits), and a *ConfigError naming
// the first bad field. A zero field is never blamed: it takes its default first.
func (c Config) WithDefaults() (Config, error) {
	c.Policy = c.Policy.WithDefaults()
	c.Circuit = c.Circuit.WithDefaults()
	if c.Grace == 0 {
		c.Grace = GraceDefault
	}
	if c.AgeMax == 0 {
		c.AgeMax = AgeMaxDefault
	}
	if c.CompactBytes == 0 {
		c.CompactBytes = CompactBytesDefault
	}
	if c.Retention == 0 {
		c.Retention = RetentionDefault
	}
	if c.RecordMax == 0 {
		c.RecordMax = journal.RecordMaxDefault
	}
	if c.SnapshotMax == 0 {
		c.SnapshotMax = max(journal.SnapshotMaxDefault, c.RecordMax)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewSource(1))
	}
	const formatMax = math.MaxUint32 / 2
	switch {
	case c.CompactBytes < 0:
		return c, configErr("CompactBytes", c.CompactBytes, "must be ≥ 0 (0 means 64 MiB)")
	case c.Retention < 0:
		return c, configErr("Retention", c.Retention, "must be ≥ 0 (0 means 10,000)")
	case c.RecordMax < 1024 || c.RecordMax > formatMax:
		return c, configErr("RecordMax", c.RecordMax, fmt.Sprintf("must be in [1024, %d] (0 means 1 MiB)", formatMax))
	case c.SnapshotMax < c.RecordMax || c.SnapshotMax > formatMax:
		return c, configErr("SnapshotMax", c.SnapshotMax, fmt.Sprintf("must be in [RecordMax, %d]", formatMax))
	}
	// The fields the machine needs, checked by the machine's own rule.
	return c, c.machine().validate()
}

func (c Config) machine() MachineConfig {
	return MachineConfig{Policy: c.Policy, Circuit: c.Circuit, Capacity: c.Capacity,
		RecordMax: c.RecordMax, Grace: c.Grace, Logger: c.Logger, Rand: c.Rand, Decode: c.Decode, AgeMax: c.AgeMax,
		Kinds: c.Kinds, KindsOnly: c.KindsOnly, Defect: c.Defect}
}

func (c Config) journal() journal.Config {
	return journal.Config{RecordMax: c.RecordMax, SnapshotMax: c.SnapshotMax, PreallocBytes: c.PreallocBytes, Logger: c.Logger}
}

// Engine is the runner over its journal: synchronous, single owner, no goroutines. See doc.go
// for the driving loop.
type Engine struct {
	cfg    Config
	j      *journal.Journal
	m      *Machine
	ticket Ticket
	poison error
	// held collects the effects the machine released (Open's own batch's included) for the
	// next Result; its Appends are the records not yet in the journal's buffer (stageHeld, begin).
	held Ready
	// appended is the Seq of the last record handed to the journal; flying is the batch
	// written and not yet synced (begin to finish), through the Seq flyThrough.
	// Invariant: flyThrough ≤ appended ≤ machine's seq; a batch flies only while the journal's does.
	appended   uint64
	flying     bool
	flyThrough uint64
	flyRecords int
	// landed counts the records synced since the last finish (Result.Records).
	landed int
	// compactAt is the journal growth that triggers the next compaction: CompactBytes, pushed
	// further after a kept failure so a snapshot that cannot be written is not retried on
	// every Commit.
	compactAt int64
	// Orphans is how many running jobs Open requeued as interrupted.
	orphans int
	// Journal work since open, for Status.
	commits, records, compactions int64
}

// Open opens (or creates) the journal name on fsys, replays it, requeues the attempts that were
// running at the crash as failed `interrupted` attempts at now, and makes that durable. No
// attempt starts until Dispatch(now, true) and a Commit.
func Open(fsys core.FS, name string, cfg Config, now time.Time) (*Engine, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	m, err := New(cfg.machine())
	if err != nil {
		return nil, err
	}
	m.at(now)
	m.replaying = true
	// A first record of an older format is a journal of an earlier sluice: said plainly, not as
	// corruption. A later one, or a newer format (never written yet), is damage: corruption.
	var format error
	first := true
	j, err := journal.Open(fsys, name, cfg.journal(), func(r journal.Record) error {
		err := m.Replay(r.Tag, r.Snapshot, r.Data)
		if first && older(err) {
			format = err
		}
		first = false
		return err
	})
	if format != nil {
		return nil, fmt.Errorf("runner: opening %q: %w; nothing was changed", name, format)
	}
	if err != nil {
		return nil, fmt.Errorf("runner: opening %q: %w", name, err)
	}
	m.endReplay()
	e := &Engine{cfg: cfg, j: j, m: m, compactAt: cfg.CompactBytes}
	dead := m.counts[Dead]
	e.orphans = m.requeueOrphans(now)
	if dead = max(0, m.counts[Dead]-dead); e.orphans > 0 {
		cfg.Logger.Warn("runner: attempts a crash interrupted were recorded as failed: jobs with attempts left wait again, the others are dead",
			"jobs", e.orphans, "requeued", e.orphans-dead, "dead", dead)
	}
	b, err := e.write()
	if err == nil {
		err = e.land(b, b.Sync())
	}
	if err != nil {
		_ = j.Close()
		return nil, fmt.Errorf("runner: opening %q: requeueing orphans: %w", name, err)
	}
	e.landed = 0 // Open's own batch is no commit's
	return e, nil
}

// Replay returns the state the journal name on fsys replays to, without requeueing orphans
// and without writing anything (journal.Read: a torn tail is left in place, not cut).
func Replay(fsys core.FS, name string, cfg Config) (Snapshot, error) {
	m, err := ReplayMachine(fsys, name, cfg)
	if err != nil {
		return Snapshot{}, err
	}
	s, _ := m.Snapshot(math.MaxInt)
	return s, nil
}

// ReplayMachine is Replay's machine, replayed and never started, for a reader that asks it
// more than its state (Machine.Blocked).
func ReplayMachine(fsys core.FS, name string, cfg Config) (*Machine, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	m, err := New(cfg.machine())
	if err != nil {
		return nil, err
	}
	var format error // as in Open: only a first record of another format
	first := true
	if _, err := journal.Read(fsys, name, cfg.journal(), func(r journal.Record) error {
		err := m.Replay(r.Tag, r.Snapshot, r.Data)
		if first && older(err) {
			format = err
		}
		first = false
		return err
	}); err != nil {
		if format != nil {
			err = format
		}
		return nil, fmt.Errorf("runner: replaying %q: %w", name, err)
	}
	return m, nil
}

// becomePoisoned records the first failure that poisons the engine and logs it, once: the
// engine refuses all work until reopened.
func (e *Engine) becomePoisoned(err error) error {
	e.poison = err
	e.cfg.Logger.Error("runner: journal failed; refusing all work until reopened", "err", err)
	return e.usable()
}

func (e *Engine) usable() error {
	if e.poison != nil {
		return fmt.Errorf("%w: %w", ErrPoisoned, e.poison)
	}
	return nil
}

func (e *Engine) step(ev Event) (Ticket, error) {
	if err := e.usable(); err != nil {
		return 0, err
	}
	t := e.ticket + 1
	switch v := ev.(type) {
	case Enqueue:
		v.Ticket = t
		ev = v
	case EnqueueMany:
		v.Ticket = t
		ev = v
	case Cancel:
		v.Ticket = t
		ev = v
	case Retry:
		v.Ticket = t
		ev = v
	case SetSchedule:
		v.Ticket = t
		ev = v
	case RemoveSchedule:
		v.Ticket = t
		ev = v
	case Pause:
		v.Ticket = t
		ev = v
	case Resume:
		v.Ticket = t
		ev = v
	}
	if err := e.m.Step(ev); err != nil {
		return 0, err
	}
	e.ticket = t
	return t, nil
}

// Enqueue submits a job due at due (zero: now) with the default options: EnqueueJob.
func (e *Engine) Enqueue(now, due time.Time, target string, payload []byte) (Ticket, uint64, error) {
	return e.EnqueueJob(now, NewJob{Due: due, Target: target, Payload: payload})
}

// EnqueueJob submits a job; the id is assigned now, and the job is acknowledged (durable) by
// the Commit whose Result.Acks holds the ticket. Checked before anything is written: a record
// exceeding RecordMax (ErrTooLarge), a due outside TimeRange (ErrTime), an empty target or
// options out of range (ErrJob). Also ErrPoisoned.
//
// A job whose unique key (Opts.Unique, within Opts.Kind) a non-terminal job holds is a
// duplicate: nothing is journaled, the id returned is the holder's, and its Ack says
// Duplicate (answered once the holder's record is durable).
func (e *Engine) EnqueueJob(now time.Time, nj NewJob) (Ticket, uint64, error) {
	t, err := e.step(Enqueue{Now: now, Due: nj.Due, Target: nj.Target, Payload: nj.Payload, Opts: nj.Opts})
	if err != nil {
		return 0, 0, err
	}
	return t, e.m.answer.ID, nil
}

// EnqueueMany submits jobs as one batch: all are checked first (the first refusal, naming its
// index, refuses them all and writes nothing), then their records go to the journal in the
// next Commit's one batch (one sync), answered by one Ack whose IDs are the jobs' ids in order.
// Duplicates (see EnqueueJob; also of an earlier job of the same batch) get their holder's id.
func (e *Engine) EnqueueMany(now time.Time, jobs []NewJob) (Ticket, []uint64, error) {
	t, err := e.step(EnqueueMany{Now: now, Jobs: jobs})
	if err != nil {
		return 0, nil, err
	}
	return t, e.m.answer.IDs, nil
}

// Cancel submits the cancellation of a non-terminal job. Errors: ErrNotFound, ErrTerminal,
// ErrPoisoned. A running attempt's handler is cancelled (Result.Cancels, why ByUser) once the
// record is durable; its outcome is ignored.
func (e *Engine) Cancel(id uint64) (Ticket, error) { return e.step(Cancel{ID: id}) }

// Retry submits the manual retry of a dead job, due at now with a fresh attempt budget.
// Errors: ErrNotFound, ErrNotDead, ErrTime, ErrDuplicate (another job took its unique key),
// ErrPoisoned.
func (e *Engine) Retry(now time.Time, id uint64) (Ticket, error) {
	return e.step(Retry{ID: id, Now: now})
}

// Pause submits the durable pause of a kind: its jobs start no attempt until Resume (running
// ones go on). Answered at once when the kind is paused already. Errors: ErrUnknownKind (a
// kind neither registered nor named by a job), ErrPoisoned.
func (e *Engine) Pause(now time.Time, kind string) (Ticket, error) {
	return e.step(Pause{Kind: kind, Now: now})
}

// Resume submits the resumption of a paused kind (answered at once when it is not paused).
func (e *Engine) Resume(now time.Time, kind string) (Ticket, error) {
	return e.step(Resume{Kind: kind, Now: now})
}

// AttemptDone feeds the outcome of a dispatched attempt that ended at now. An outcome for a
// token that is not running (cancelled, requeued after a crash, unknown) is ignored and logged.
func (e *Engine) AttemptDone(now time.Time, tok Token, out Outcome) error {
	if err := e.usable(); err != nil {
		return err
	}
	// Keep the Finished record under RecordMax whatever the error's size.
	if limit := min(errMax, e.cfg.RecordMax-recordOverheadMax); len(out.Err) > limit {
		out.Err = cutUTF8(out.Err, limit)
	}
	return e.m.Step(AttemptDone{Now: now, Token: tok, Outcome: out})
}

// Dispatch turns admission on (Run, Drain) or off at now. Off begins a graceful stop (see the
// Dispatch event): drive it with Flush at each outcome and at Result.Wake until
// Status().Stopped, then Flush, optionally Compact, and Close.
func (e *Engine) Dispatch(now time.Time, on bool) error {
	if err := e.usable(); err != nil {
		return err
	}
	return e.m.Step(Dispatch{Now: now, On: on})
}

// Result is what one Commit made happen.
type Result struct {
	// Acks answer every command submitted before the Commit: their records are durable.
	Acks []Ack
	// Starts are attempts to dispatch now; their Started records are durable.
	Starts []Attempt
	// Cancels are running handlers to cancel now, and why.
	Cancels []CancelAttempt
	// Stopped: a graceful stop is done (admission off, nothing running or the rest abandoned):
	// Flush, Compact if wanted, and Close.
	Stopped bool
	// Settled are jobs whose terminal state became durable in this commit (or, for the first
	// Commit, in Open's orphan requeue).
	Settled []Settled
	// Transitions are attempt ends and breaker deferrals made durable in this commit.
	Transitions []Transition
	// Wake is when to Commit again if nothing else happens; zero when only a command or an
	// outcome can make progress.
	Wake time.Time
	// Records is how many records became durable (one batch, or two when a compaction
	// flushed the records submitted during the flight).
	Records int
	// Compacted reports a compaction after the batch; CompactErr a failed one. A kept failure
	// (the old journal stands) leaves the engine usable; a lost one poisons it (Poisoned()).
	Compacted  bool
	CompactErr error
	// CompactDue: a compaction is due, but records submitted during the flight are not durable
	// yet; it runs at the first quiet finish (take nothing new during the next flight).
	CompactDue bool
}

// Commit schedules due jobs at now, writes every record produced since the last Commit as one
// journal batch, syncs it, and returns what became durable: begin, Batch.Sync and finish in one
// call. On an error nothing in the batch was acknowledged or started and the engine is poisoned.
func (e *Engine) Commit(now time.Time) (Result, error) { return e.commit(now, true) }

// Flush is Commit without admitting anything: commands and outcomes become durable and are
// acknowledged, a graceful stop moves on, no due job is admitted.
func (e *Engine) Flush(now time.Time) (Result, error) { return e.commit(now, false) }

func (e *Engine) commit(now time.Time, admit bool) (Result, error) {
	b, err := e.begin(now, admit)
	if err != nil {
		return Result{}, err
	}
	return e.finish(b, b.Sync())
}

// Batch is a journal batch written by a Node (Effects.Sync) whose sync it awaits (SyncDone).
type Batch struct{ fl journal.Flight }

// Empty reports that nothing was written.
func (b Batch) Empty() bool { return b.fl.Empty() }

// Sync fsyncs the batch (nil when Empty). It touches only the journal's file, so a driver may
// run it on another goroutine while it keeps stepping the Node; it must run once, and its error
// must reach the Node (SyncDone).
func (b Batch) Sync() error { return b.fl.Sync() }

// begin is the first half of a pipelined commit (Node's write): it schedules due jobs at now
// (admit: and admits them) and writes every record produced so far as one journal batch,
// returning it unsynced. Until finish, commands and outcomes may be submitted (and framed by
// stageHeld): they go into the next batch, written only by the next begin, after finish (batch
// N+1 never before sync N returned). Nothing is acknowledged or started before finish. A
// second begin before finish is misuse and panics; a write failure poisons the engine.
func (e *Engine) begin(now time.Time, admit bool) (Batch, error) {
	if err := e.usable(); err != nil {
		return Batch{}, err
	}
	if e.flying {
		panic("runner: a batch written with one in flight; land it first")
	}
	e.m.Step(Tick{Now: now, Admit: admit})
	return e.write()
}

// stageHeld moves the records of the commands and outcomes submitted so far into the journal's
// next batch (their framing and checksums), so that this work overlaps a batch in flight; begin
// writes them. It decides nothing (admission waits for begin) and writes nothing. On a journal
// refusal (ErrFull) the engine is poisoned.
func (e *Engine) stageHeld() error {
	if err := e.usable(); err != nil {
		return err
	}
	e.hold(e.m.Ready())
	return e.stage()
}

// finish is the second half of a pipelined commit: syncErr is b.Sync()'s result. It reports the
// batch synced to the machine and returns what became durable (everything held since the last
// finish, too), and compacts past CompactBytes when it is quiet (a snapshot stands for exactly
// what is durable); when records submitted during the flight are not durable yet it sets
// Result.CompactDue instead. A failed sync poisons the engine: nothing in the batch was
// acknowledged or started.
func (e *Engine) finish(b Batch, syncErr error) (Result, error) {
	if err := e.land(b, syncErr); err != nil {
		return Result{}, err
	}
	if err := e.usable(); err != nil {
		return Result{}, err
	}
	var res Result
	if e.j.GrownBytes() > e.compactAt {
		if e.m.seq != e.m.synced {
			res.CompactDue = true
		} else {
			res.CompactErr = e.compact()
			res.Compacted = res.CompactErr == nil
		}
	}
	h := e.held
	res.Acks, res.Starts, res.Cancels, res.Settled, res.Transitions = h.Acks, h.Starts, h.Cancels, h.Settled, h.Transitions
	e.held = Ready{Appends: h.Appends}
	res.Records, e.landed = e.landed, 0
	res.Wake = e.m.WakeAt()
	res.Stopped = e.m.Status().Stopped
	return res, nil
}

// quiet reports that every record the machine produced is durable (no batch in flight, nothing
// submitted since the last finish): the live state is the durable state, so reads may be
// answered.
func (e *Engine) quiet() bool { return !e.flying && e.m.seq == e.m.synced }

// hold keeps rd's effects for the next Result and its records for the journal.
// Ready's lists are the caller's (the machine starts new ones), so an empty held list takes
// rd's as it is instead of copying it.
func (e *Engine) hold(rd Ready) {
	h := &e.held
	h.Appends = adopt(h.Appends, rd.Appends)
	h.Acks = adopt(h.Acks, rd.Acks)
	h.Starts = adopt(h.Starts, rd.Starts)
	h.Cancels = adopt(h.Cancels, rd.Cancels)
	h.Settled = adopt(h.Settled, rd.Settled)
	h.Transitions = adopt(h.Transitions, rd.Transitions)
}

func adopt[T any](held, more []T) []T {
	if len(held) == 0 && more != nil {
		return more
	}
	return append(held, more...)
}

// stage appends the held records to the journal's buffer.
func (e *Engine) stage() error {
	for _, a := range e.held.Appends {
		if _, err := e.j.Append(a.Tag, a.Data); err != nil {
			return e.becomePoisoned(fmt.Errorf("appending record %d: %w", a.Seq, err))
		}
		e.appended = a.Seq
	}
	e.held.Appends = e.held.Appends[:0]
	return nil
}

// write takes the machine's effects and writes every record not yet written as one batch,
// returned in flight.
func (e *Engine) write() (Batch, error) {
	e.hold(e.m.Ready())
	if len(e.held.Appends) > 0 {
		if err := e.stage(); err != nil {
			return Batch{}, err
		}
	}
	fl, err := e.j.Write()
	if err != nil {
		return Batch{}, e.becomePoisoned(fmt.Errorf("committing records through %d: %w", e.appended, err))
	}
	if fl.Empty() {
		return Batch{}, nil
	}
	e.flying, e.flyThrough, e.flyRecords = true, e.appended, int(e.appended-e.m.synced)
	return Batch{fl: fl}, nil
}

// land ends batch b with its sync's result: the machine learns it is durable, and the effects
// it releases are held for the Result.
func (e *Engine) land(b Batch, syncErr error) error {
	if b.Empty() {
		return nil
	}
	if !e.flying {
		panic("runner: the landing of a batch that is not in flight")
	}
	e.flying = false
	if _, err := e.j.Synced(b.fl, syncErr); err != nil {
		if e.poison != nil {
			return e.usable()
		}
		return e.becomePoisoned(fmt.Errorf("committing records through %d: %w", e.flyThrough, err))
	}
	e.commits++
	e.records += int64(e.flyRecords)
	e.landed += e.flyRecords
	e.m.Step(Synced{Through: e.flyThrough})
	e.hold(e.m.Ready())
	return nil
}

// Compact writes a snapshot now (it also runs on its own from Commit past CompactBytes).
// Everything submitted must have been committed first (misuse panics otherwise). A kept failure
// returns an error and leaves the engine usable; a lost one poisons it.
func (e *Engine) Compact() error {
	if err := e.usable(); err != nil {
		return err
	}
	if e.flying || e.m.seq != e.m.synced {
		panic("runner: Compact with records not committed; Commit first")
	}
	return e.compact()
}

func (e *Engine) compact() error {
	s, drop := e.m.snapshot(e.cfg.Retention, e.m.now)
	err := e.j.Compact(TagSnapshot, EncodeSnapshot(s))
	if err != nil {
		if errors.Is(err, journal.ErrPoisoned) || errors.Is(err, journal.ErrClosed) {
			return e.becomePoisoned(fmt.Errorf("compaction lost after the rename: %w", err))
		}
		e.compactAt = e.j.GrownBytes() + e.cfg.CompactBytes
		e.cfg.Logger.Warn("runner: compaction failed; the old journal stands", "err", err)
		return fmt.Errorf("runner: compaction kept the old journal: %w", err)
	}
	e.compactAt = e.cfg.CompactBytes
	e.compactions++
	e.m.Prune(drop)
	e.m.pruneWindows(e.m.now)
	return nil
}

// Close closes the journal. Records submitted and not committed are dropped (never acked).
// A crash is simulated by dropping the engine without Close.
func (e *Engine) Close() error { return e.j.Close() }

// Poisoned returns the error that poisoned the engine, or nil.
func (e *Engine) Poisoned() error { return e.usable() }

// Orphans is how many running jobs Open requeued as interrupted.
func (e *Engine) Orphans() int { return e.orphans }

// Get returns a copy of job id (terminal jobs until compaction prunes them).
func (e *Engine) Get(id uint64) (Job, bool) { return e.m.Get(id) }

// State returns the whole durable state, jobs ascending by id (O(n): for checkers and tests).
// After a Commit it equals Replay of the same disk.
func (e *Engine) State() Snapshot {
	s, _ := e.m.Snapshot(math.MaxInt)
	return s
}

// EachJob calls fn with every job, ascending by id, without copying it (O(n), for checkers
// that compare the whole state after every commit: fn must not modify or keep the job).
func (e *Engine) EachJob(fn func(*Job)) {
	var v Job
	for _, j := range e.m.order {
		j.view(&v)
		fn(&v)
	}
}

// List returns a page of jobs (Machine.List).
func (e *Engine) List(from, to uint64, match func(*Job) bool, limit, scanMax int) ([]Job, uint64, bool) {
	return e.m.List(from, to, match, limit, scanMax)
}

// Status summarises the engine in O(1): the machine's Status with the journal's fields.
func (e *Engine) Status() Status {
	s := e.m.Status()
	s.Durable, s.Grown, s.Poisoned, s.Orphans = e.j.Durable(), e.j.GrownBytes(), e.poison, e.orphans
	s.Bytes = e.j.Size()
	s.Commits, s.Records, s.Compactions = e.commits, e.records, e.compactions
	return s
}

// IdleThrough reports that nothing due at or before t is waiting and nothing runs: DrainDue
// is done.
func (e *Engine) IdleThrough(t time.Time) bool { return e.m.IdleThrough(t) }

// Idle reports that nothing is waiting (due or not, deferred included) or running: Drain is done.
func (e *Engine) Idle() bool { return e.m.Idle() }

// Register adds a kind before the first Dispatch (Machine.Register).
func (e *Engine) Register(k KindConfig) error { return e.m.Register(k) }

// Kinds summarises every kind registered or named by a job, by name.
func (e *Engine) Kinds() []KindStatus { return e.m.Kinds() }

// Blocked is why waiting job id is not starting (Machine.Blocked).
func (e *Engine) Blocked(id uint64) Block { return e.m.Blocked(id) }

// Paused lists the paused kinds by name (Machine.Paused).
func (e *Engine) Paused() []string { return e.m.Paused() }

// CheckInvariants runs the machine's invariants and its journal's (for the simulator and tests).
func (e *Engine) CheckInvariants() error {
	return errors.Join(e.m.checkInvariants(), e.j.CheckInvariants())
}
