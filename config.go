package sluice

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"runtime"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/runneropt"
)

// Policy is the retry policy: at most Attempts attempts in total; the n-th retry waits a
// jittered min(Base·2^n, Cap) (a server's Retry-After replaces it, capped at Cap); no attempt
// starts at or after first due + Deadline. Zero fields take DefaultPolicy()'s.
type Policy struct {
	Attempts int           // attempts in total, the first included
	Base     time.Duration // backoff of the first retry
	Cap      time.Duration // the largest backoff (and the largest server-requested wait); at least Base
	Deadline time.Duration // counted from the job's first due time; 0 means none
}

// Circuit configures the breaker every target gets: Threshold counted failures within Window
// open it for Cooldown; then it admits Probes attempts at once, and a probe's outcome closes or
// reopens it. Zero fields take DefaultCircuit()'s.
type Circuit struct {
	Threshold int
	Window    time.Duration
	Cooldown  time.Duration
	Probes    int
}

// Config configures a Runner. The zero Config is valid: every zero field takes its default
// (the table below Config), and an error names only a field that was set.
type Config struct {
	// Capacity bounds the attempts running at once; default runtime.NumCPU(), at least 1.
	Capacity int
	// Grace is how long a stop (Run's context ending, Drain's context ending, Close) waits for
	// running attempts before cancelling their contexts, and again for the cancelled ones to
	// return before abandoning them. An attempt the stop cancelled that does not succeed is
	// released: the job waits again at its due time and the attempt does not count.
	Grace time.Duration
	// AgeMax is the starvation rule of priorities: a job due for AgeMax or longer starts
	// before any job of higher priority (the longest waiting first), so a steady stream of
	// urgent jobs delays a low-priority one by at most AgeMax and one unit's turn.
	AgeMax time.Duration
	// Policy is the retry policy; Circuit the breaker every target gets.
	Policy  Policy
	Circuit Circuit
	// CompactBytes: compact when the journal holds more than this beyond its last snapshot
	// (or its start), counted from the file itself, so restarts do not put it off.
	CompactBytes int64
	// CompactOnClose writes a snapshot at Close (a small journal for the next Open).
	CompactOnClose bool
	// Retention is how many terminal jobs compaction keeps for inspection.
	Retention int
	// RecordMax caps one journal record, at least 1 KiB: an enqueue whose record would be
	// bigger is refused (ErrTooLarge) before anything is written.
	RecordMax int
	// Logger receives the runner's logs; default slog.Default().
	Logger *slog.Logger
	// Clock supplies time and timers; default clock.New().
	Clock clock.Clock
	// Seed seeds the backoff jitter; 0 picks one from the clock at Open.
	Seed int64
	// OnSettled, when set, is called after a job's terminal state (succeeded, dead, cancelled)
	// is durable: once per job, or twice for a dead job holding its sequence (WithHoldOnDead)
	// that is then cancelled. It runs on the runner's owner goroutine: it must be quick and must
	// not call the Runner.
	OnSettled func(Settled)
	// OnAttemptStarted, OnAttemptEnded, OnDeferred and OnCommitted report attempts, breaker
	// deferrals and journal batches as they become durable; they run on the owner goroutine
	// too, with the same rules (see Hooks in docs/observability.md).
	OnAttemptStarted func(AttemptStarted)
	OnAttemptEnded   func(AttemptEnded)
	OnDeferred       func(Deferred)
	OnCommitted      func(Committed)
	// Middleware wraps every attempt's handler, outermost first (see Middleware).
	Middleware []Middleware

	// opts are the internal seams (internal/runneropt): a core.FS instead of the directory,
	// and the benchmark's one-commit-per-record baseline.
	opts runneropt.Options
}

// SetInternalOptions is for sluice's own tests and benchmarks, of no use to a program (which
// cannot name runneropt.Options): it sets the seams a Config carries.
func SetInternalOptions(cfg *Config, o runneropt.Options) { cfg.opts = o }

// Settled reports a job whose terminal state is durable (see Config.OnSettled).
type Settled struct {
	ID       uint64
	State    State
	Attempts int
	Reason   Reason // dead: ReasonSpent, ReasonLate, ReasonPermanent or ReasonPanic
	Err      error  // dead: the last failure
}

// The defaults of Config: the one table (core/runner's, which the simulator runs too).
//
//	Capacity      runtime.NumCPU()
//	Grace         10s
//	AgeMax        1m
//	Policy        Attempts 5, Base 1s, Cap 5m (at least Base), Deadline none
//	Circuit       Threshold 5, Window 30s, Cooldown 30s, Probes 1
//	CompactBytes  64 MiB
//	Retention     10,000 terminal jobs
//	RecordMax     1 MiB
const (
	DefaultGrace        = runner.GraceDefault
	DefaultAgeMax       = runner.AgeMaxDefault
	DefaultCompactBytes = runner.CompactBytesDefault
	DefaultRetention    = runner.RetentionDefault
	DefaultRecordMax    = journal.RecordMaxDefault
)

// DefaultPolicy returns the retry policy a zero Config.Policy gets. A function, not a
// variable, so no package can change the defaults of every other.
func DefaultPolicy() Policy { return Policy(retry.DefaultPolicy()) }

// DefaultCircuit returns the breaker a zero Config.Circuit gets (a function, as DefaultPolicy).
func DefaultCircuit() Circuit { return Circuit(breaker.DefaultCircuit()) }

// withDefaults fills the fields only the driver knows (capacity from the CPU count, logger,
// clock, seed) and hands the rest to the engine's one table of defaults and checks. It returns
// the filled Config and the engine's; errors name the field the user set.
func (c Config) withDefaults() (Config, runner.Config, error) {
	if c.Capacity < 0 {
		return c, runner.Config{}, fieldErr("Capacity", c.Capacity, "must be ≥ 0 (0 means runtime.NumCPU())")
	}
	setDefault(&c.Capacity, max(1, runtime.NumCPU()))
	envDefaults(&c.Logger, &c.Clock, &c.Seed)
	c.hookDefaults()
	ec, err := runner.Config{
		Policy:       retry.Policy(c.Policy),
		Circuit:      breaker.Circuit(c.Circuit),
		Capacity:     c.Capacity,
		CompactBytes: c.CompactBytes,
		Retention:    c.Retention,
		RecordMax:    c.RecordMax,
		Grace:        c.Grace,
		AgeMax:       c.AgeMax,
		Logger:       c.Logger,
		Rand:         rand.New(rand.NewSource(c.Seed)),
	}.WithDefaults()
	var fe *runner.ConfigError
	if errors.As(err, &fe) {
		return c, ec, fieldErr(fe.Field, fe.Value, fe.Rule)
	}
	if err != nil {
		return c, ec, err
	}
	c.Policy, c.Circuit = Policy(ec.Policy), Circuit(ec.Circuit)
	c.CompactBytes, c.Retention, c.RecordMax, c.Grace = ec.CompactBytes, ec.Retention, ec.RecordMax, ec.Grace
	c.AgeMax = ec.AgeMax
	return c, ec, nil
}

// withDefaults fills p's zero fields from core/retry's defaults and checks it there, for
// configs other than the runner's (the worker's), naming the field as Policy.X.
func (p Policy) withDefaults() (Policy, error) {
	rp := retry.Policy(p).WithDefaults()
	var fe *retry.FieldError
	if err := rp.Validate(); errors.As(err, &fe) {
		return p, fieldErr("Policy."+fe.Field, fe.Value, fe.Rule)
	}
	return Policy(rp), nil
}

// setDefault sets *v to def when it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// envDefaults fills the logger, clock and jitter seed that Config and WorkerConfig share; the
// seed comes from the clock, so the clock is filled first.
func envDefaults(logger **slog.Logger, clk *clock.Clock, seed *int64) {
	if *logger == nil {
		*logger = slog.Default()
	}
	if *clk == nil {
		*clk = clock.New()
	}
	if *seed == 0 {
		*seed = (*clk).Now().UnixNano()
	}
}

// ConfigError reports an invalid configuration field.
type ConfigError struct {
	Field string // e.g. "Policy.Attempts"
	Value any
	Rule  string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("sluice: invalid config: %s = %v: %s", e.Field, e.Value, e.Rule)
}

func fieldErr(field string, value any, rule string) error {
	return &ConfigError{Field: field, Value: value, Rule: rule}
}
