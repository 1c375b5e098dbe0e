package sluice

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/benbjohnson/clock"
)

// Policy is the retry policy of SPEC 2.2. Zero fields take the defaults.
type Policy struct {
	Attempts int           // attempts in total, the first included; default 5
	Base     time.Duration // backoff of the first retry; default 1s
	Cap      time.Duration // the largest backoff (and the largest server-requested wait); default 5m
	Deadline time.Duration // counted from the job's first due time; 0 means none
}

// Circuit configures the per-target breaker of SPEC 2.3. Zero fields take the defaults.
type Circuit struct {
	Threshold int           // failures within Window that open the breaker; default 5
	Window    time.Duration // default 30s
	Cooldown  time.Duration // how long an open breaker refuses; default 30s
	Probes    int           // attempts a half-open breaker admits at once; default 1
}

// Config configures a Runner. The zero Config is valid: every zero field takes its default.
type Config struct {
	// Capacity bounds the attempts running at once; default runtime.NumCPU(), at least 1.
	Capacity int
	// Grace is how long Run waits for running attempts after its context ends before it
	// cancels their contexts; default 10s.
	Grace time.Duration
	// Policy is the retry policy; Circuit the breaker every target gets.
	Policy  Policy
	Circuit Circuit
	// CompactBytes: compact when the journal has grown by more than this since open or the
	// last compaction; default 64 MiB.
	CompactBytes int64
	// CompactOnClose writes a snapshot at Close (a small journal for the next Open).
	CompactOnClose bool
	// Retention is how many terminal jobs compaction keeps for inspection; default 10,000.
	Retention int
	// RecordMax caps one journal record (an enqueue with a bigger payload is refused before
	// anything is written); default 1 MiB.
	RecordMax int
	// Logger receives the runner's logs; default slog.Default().
	Logger *slog.Logger
	// Clock supplies time and timers; default clock.New(). Tests pass a *clock.Mock.
	Clock clock.Clock
	// Seed seeds the backoff jitter; 0 picks one from the clock at Open.
	Seed int64
	// SyncEveryRecord turns group commit off: every command and every outcome gets its own
	// commit, and the Started records of the attempts it admits another one: about one
	// fsync per record. For benchmarks that measure what group commit saves.
	SyncEveryRecord bool
	// OnSettled, when set, is called after a job's terminal state (succeeded, dead, cancelled)
	// is durable. It runs on the runner's owner goroutine: it must be quick and must not call
	// the Runner.
	OnSettled func(Settled)
}

// Settled reports a job whose terminal state is durable (see Config.OnSettled).
type Settled struct {
	ID       uint64
	State    State
	Attempts int
	Reason   string // dead: "spent", "late", "permanent" or "panic"
	Err      error  // dead: the last failure
}

// Defaults of Config (SPEC 2).
const (
	DefaultGrace        = 10 * time.Second
	DefaultCompactBytes = 64 << 20
	DefaultRetention    = 10_000
	DefaultRecordMax    = 1 << 20
)

// DefaultPolicy is the retry policy a zero Config.Policy gets.
var DefaultPolicy = Policy{Attempts: 5, Base: time.Second, Cap: 5 * time.Minute}

// DefaultCircuit is the breaker a zero Config.Circuit gets.
var DefaultCircuit = Circuit{Threshold: 5, Window: 30 * time.Second, Cooldown: 30 * time.Second, Probes: 1}

// withDefaults fills zero fields and validates the rest; errors name the field.
func (c Config) withDefaults() (Config, error) {
	if err := orDefault("Capacity", &c.Capacity, max(1, runtime.NumCPU()), "must be ≥ 0 (0 means runtime.NumCPU())"); err != nil {
		return c, err
	}
	if err := orDefault("Grace", &c.Grace, DefaultGrace, "must be ≥ 0"); err != nil {
		return c, err
	}
	var err error
	if c.Policy, err = c.Policy.withDefaults(); err != nil {
		return c, err
	}
	if c.Circuit, err = c.Circuit.withDefaults(); err != nil {
		return c, err
	}
	if err := orDefault("CompactBytes", &c.CompactBytes, DefaultCompactBytes, "must be ≥ 0"); err != nil {
		return c, err
	}
	if err := orDefault("Retention", &c.Retention, DefaultRetention, "must be ≥ 0"); err != nil {
		return c, err
	}
	if c.RecordMax < 0 || (c.RecordMax > 0 && c.RecordMax < 1024) {
		return c, fieldErr("RecordMax", c.RecordMax, "must be ≥ 1024 (0 means 1 MiB)")
	}
	setDefault(&c.RecordMax, DefaultRecordMax)
	envDefaults(&c.Logger, &c.Clock, &c.Seed)
	return c, nil
}

func (p Policy) withDefaults() (Policy, error) {
	d := DefaultPolicy
	switch {
	case p.Attempts < 0:
		return p, fieldErr("Policy.Attempts", p.Attempts, "must be ≥ 1 (0 means 5)")
	case p.Base < 0:
		return p, fieldErr("Policy.Base", p.Base, "must be > 0 (0 means 1s)")
	case p.Cap < 0:
		return p, fieldErr("Policy.Cap", p.Cap, "must be > 0 (0 means 5m)")
	case p.Deadline < 0:
		return p, fieldErr("Policy.Deadline", p.Deadline, "must be ≥ 0 (0 means none)")
	}
	setDefault(&p.Attempts, d.Attempts)
	setDefault(&p.Base, d.Base)
	setDefault(&p.Cap, max(d.Cap, p.Base))
	if p.Cap < p.Base {
		return p, fieldErr("Policy.Cap", p.Cap, fmt.Sprintf("must be ≥ Policy.Base (%v)", p.Base))
	}
	return p, nil
}

func (c Circuit) withDefaults() (Circuit, error) {
	d := DefaultCircuit
	switch {
	case c.Threshold < 0:
		return c, fieldErr("Circuit.Threshold", c.Threshold, "must be ≥ 1 (0 means 5)")
	case c.Window < 0:
		return c, fieldErr("Circuit.Window", c.Window, "must be > 0 (0 means 30s)")
	case c.Cooldown < 0:
		return c, fieldErr("Circuit.Cooldown", c.Cooldown, "must be > 0 (0 means 30s)")
	case c.Probes < 0:
		return c, fieldErr("Circuit.Probes", c.Probes, "must be ≥ 1 (0 means 1)")
	}
	setDefault(&c.Threshold, d.Threshold)
	setDefault(&c.Window, d.Window)
	setDefault(&c.Cooldown, d.Cooldown)
	setDefault(&c.Probes, d.Probes)
	return c, nil
}

// setDefault sets *v to def when it is zero.
func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// orDefault refuses a negative *v (a *ConfigError naming field) and sets a zero one to def.
func orDefault[T ~int | ~int64](field string, v *T, def T, rule string) error {
	if *v < 0 {
		return fieldErr(field, *v, rule)
	}
	setDefault(v, def)
	return nil
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
