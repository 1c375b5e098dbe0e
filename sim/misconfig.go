package sim

import (
	"errors"
	"math/rand"
	"slices"
	"strconv"
	"strings"

	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/breaker"
	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
)

// The misconfiguration family: a node's first open is sometimes tried with one field of its
// configuration broken (a value derived from the run's knobs), and the world checks that the
// open is refused before it touches the disk, with an error that wraps the package's
// invalid-config sentinel and names that field; then it opens with the valid configuration.
// Draws come from the node's own stream, so no other family's draws move.

// badRunnerField is one way to break a runner.Config: the field the refusal must name.
type badRunnerField struct {
	field string
	apply func(c *runner.Config)
}

var badRunnerFields = []badRunnerField{
	{"Policy.Attempts", func(c *runner.Config) { c.Policy.Attempts = -1 - c.Policy.Attempts }},
	{"Policy.Base", func(c *runner.Config) { c.Policy.Base = -1 - c.Policy.Base }},
	{"Policy.Cap", func(c *runner.Config) { c.Policy.Cap = max(1, c.Policy.Base/2); c.Policy.Base = 2 * c.Policy.Cap }},
	{"Policy.Deadline", func(c *runner.Config) { c.Policy.Deadline = -1 - c.Policy.Deadline }},
	{"Circuit.Threshold", func(c *runner.Config) { c.Circuit.Threshold = -1 - c.Circuit.Threshold }},
	{"Circuit.Window", func(c *runner.Config) { c.Circuit.Window = -1 - c.Circuit.Window }},
	{"Circuit.Cooldown", func(c *runner.Config) { c.Circuit.Cooldown = -1 - c.Circuit.Cooldown }},
	{"Circuit.Probes", func(c *runner.Config) { c.Circuit.Probes = -1 - c.Circuit.Probes }},
	{"Grace", func(c *runner.Config) { c.Grace = -1 - c.Grace }},
	{"Capacity", func(c *runner.Config) { c.Capacity = -1 - c.Capacity }},
	{"CompactBytes", func(c *runner.Config) { c.CompactBytes = -1 - c.CompactBytes }},
	{"Retention", func(c *runner.Config) { c.Retention = -1 - c.Retention }},
	{"RecordMax", func(c *runner.Config) { c.RecordMax = 1023 }}, // below the least allowed, whatever the node runs
	{"SnapshotMax", func(c *runner.Config) { c.SnapshotMax = c.RecordMax - 1 }},
	{"AgeMax", func(c *runner.Config) { c.AgeMax = -1 - c.AgeMax }},
	{"Limit", func(c *runner.Config) {
		c.Kinds = append(slices.Clone(c.Kinds), runner.KindConfig{Name: "bad", Limit: -1})
	}},
}

// misconfigDrawn says whether this node's first open is tried misconfigured (one in four).
func misconfigDrawn(r *rand.Rand) bool { return r.Intn(4) == 0 }

// tryBadRunnerConfig opens node n with one drawn field of its config broken and checks the
// refusal (InvConfigRefused).
func (n *runnerNode) tryBadRunnerConfig(r *rand.Rand) {
	w := n.w
	bad := badRunnerFields[r.Intn(len(badRunnerFields))]
	cfg := n.cfg
	bad.apply(&cfg)
	before := n.disk.Ops()
	e, err := runner.Open(n.disk, journalName, cfg, w.now())
	if err == nil {
		w.chk.Fail(InvConfigRefused, "%s: open accepted a config with a bad %s", n.name, bad.field)
		e.Close()
		return
	}
	w.trace(n.name, "open with a bad "+bad.field+" refused, as it must: "+err.Error())
	var ce *runner.ConfigError
	named := ""
	if errors.As(err, &ce) {
		named = ce.Field
	}
	checkConfigRefusal(w, n.name, err, runner.ErrInvalidConfig, bad.field, named, n.disk.Ops() == before)
	// An inspection (Replay) with the same config is refused the same way, reading nothing.
	before = n.disk.Ops()
	_, err = runner.Replay(n.disk, journalName, cfg)
	if err == nil {
		w.chk.Fail(InvConfigRefused, "%s: Replay accepted a config with a bad %s", n.name, bad.field)
		return
	}
	named = ""
	if errors.As(err, &ce) {
		named = ce.Field
	}
	checkConfigRefusal(w, n.name, err, runner.ErrInvalidConfig, bad.field, named, n.disk.Ops() == before)
}

// badWorkerField is one way to break a worker.Config: the field the refusal must name.
type badWorkerField struct {
	field string
	apply func(c *worker.Config)
}

var badWorkerFields = []badWorkerField{
	{"Window", func(c *worker.Config) { c.Window += time.Second / 2 }},
	{"Window", func(c *worker.Config) { c.Ceiling, c.Window = 0, worker.CeilingDefault+time.Second }},
	{"Ceiling", func(c *worker.Config) { c.Ceiling = c.Window - 1 }},
	{"Wait", func(c *worker.Config) { c.Wait, c.WaitNone = -1-c.Wait, false }},
	{"Wait", func(c *worker.Config) { c.Wait, c.WaitNone = c.Window, false }},
	{"BatchMax", func(c *worker.Config) { c.BatchMax = core.BatchMax + 1 }},
	{"Concurrency", func(c *worker.Config) { c.Concurrency = -1 - c.Concurrency }},
	{"Prefetch", func(c *worker.Config) { c.Prefetch = -1 - c.Prefetch }},
	{"Budget", func(c *worker.Config) { c.Budget = -1 - c.Budget }},
	{"RedriveMaxReceives", func(c *worker.Config) { c.RedriveMaxReceives = -1 - c.RedriveMaxReceives }},
	{"Grace", func(c *worker.Config) { c.Grace = -1 - c.Grace }},
	{"IdleDelay", func(c *worker.Config) { c.IdleDelay = -1 - c.IdleDelay }},
	{"Lease.ReceiptsMax", func(c *worker.Config) { c.Lease.ReceiptsMax = c.Concurrency + c.Prefetch + c.BatchMax - 1 }},
	{"ReceiveBackoff", func(c *worker.Config) { c.ReceiveBackoff = []time.Duration{time.Second, -time.Second} }},
	{"Retry.Attempts", func(c *worker.Config) { c.Retry.Attempts = -1 - c.Retry.Attempts }},
	{"Retry.Base", func(c *worker.Config) { c.Retry.Base = -1 - c.Retry.Base }},
	{"Retry.Cap", func(c *worker.Config) { c.Retry.Cap = max(1, c.Retry.Base/2); c.Retry.Base = 2 * c.Retry.Cap }},
	{"Retry.Deadline", func(c *worker.Config) { c.Retry.Deadline = -1 - c.Retry.Deadline }},
	{"Lease.Pacing", func(c *worker.Config) { c.Lease.Pacing = []time.Duration{time.Second, 0} }},
	{"Lease.Coalesce", func(c *worker.Config) { c.Lease.Coalesce = -1 - c.Lease.Coalesce }},
	{"StopMargin", func(c *worker.Config) { c.StopMargin = c.Window / 10 }},
}

// tryBadWorkerConfig starts worker p's machine with one drawn field of its config broken and
// checks the refusal (InvConfigRefused). A machine is pure, so nothing can have been touched.
func (p *workerProc) tryBadWorkerConfig() {
	w := p.w
	r := Stream(w.cfg.Seed, "misconfig/"+p.name)
	if !misconfigDrawn(r) {
		return
	}
	bad := badWorkerFields[r.Intn(len(badWorkerFields))]
	cfg := p.config()
	bad.apply(&cfg)
	if _, err := worker.New(cfg); err == nil {
		w.chk.Fail(InvConfigRefused, "%s: worker.New accepted a config with a bad %s", p.name, bad.field)
		return
	} else {
		w.trace(p.name, "start with a bad "+bad.field+" refused, as it must: "+err.Error())
		var ce *worker.ConfigError
		named := ""
		if errors.As(err, &ce) {
			named = ce.Field
		}
		checkConfigRefusal(w, p.name, err, worker.ErrConfig, bad.field, named, true)
	}
}

// checkConfigRefusal checks one refusal: it wraps sentinel, names field (as the error's
// typed Field when it has one, named, and part by part in its text), and nothing was written.
func checkConfigRefusal(w *World, who string, err, sentinel error, field, named string, untouched bool) {
	inText := true
	for _, part := range strings.Split(field, ".") {
		inText = inText && strings.Contains(err.Error(), part)
	}
	switch {
	case !errors.Is(err, sentinel):
		w.chk.Fail(InvConfigRefused, "%s: a bad %s was refused with %v, which does not wrap %v", who, field, err, sentinel)
	case named != "" && named != field:
		w.chk.Fail(InvConfigRefused, "%s: a bad %s was refused naming %s", who, field, named)
	case !inText:
		w.chk.Fail(InvConfigRefused, "%s: the refusal of a bad %s does not name it: %v", who, field, err)
	case !untouched:
		w.chk.Fail(InvConfigRefused, "%s: the refused open with a bad %s touched the disk", who, field)
	default:
		w.chk.Pass(InvConfigRefused)
	}
}

// Zero means the default: a field drawn equal to its documented default is written as zero
// half the time (each field by its own draw, from the node's or worker's own stream), as a
// user relying on the default writes it. The checker keeps the drawn value, so a default
// that is not what its documentation says breaks a check.
func zeroIfDefault[T comparable](v *T, def T, r *rand.Rand) {
	if r.Intn(2) == 0 && *v == def {
		var zero T
		*v = zero
	}
}

// zeroRunnerDefaults applies zeroIfDefault to the runner config's defaulted fields.
func zeroRunnerDefaults(c *runner.Config, r *rand.Rand) {
	p, b := retry.DefaultPolicy(), breaker.DefaultCircuit()
	zeroIfDefault(&c.Policy.Attempts, p.Attempts, r)
	zeroIfDefault(&c.Policy.Base, p.Base, r)
	zeroIfDefault(&c.Circuit.Threshold, b.Threshold, r)
	zeroIfDefault(&c.Circuit.Window, b.Window, r)
	zeroIfDefault(&c.Circuit.Cooldown, b.Cooldown, r)
	zeroIfDefault(&c.Circuit.Probes, b.Probes, r)
	zeroIfDefault(&c.CompactBytes, runner.CompactBytesDefault, r)
	zeroIfDefault(&c.Retention, runner.RetentionDefault, r)
	zeroIfDefault(&c.Grace, runner.GraceDefault, r)
	if r.Intn(8) == 0 {
		c.Rand = nil // the engine's own fixed stream
	}
	zeroIfDefault(&c.Policy.Cap, p.Cap, r)
}

// zeroWorkerDefaults applies zeroIfDefault to the worker config's defaulted fields.
func (p *workerProc) zeroWorkerDefaults(c worker.Config) worker.Config {
	r := Stream(p.w.cfg.Seed, "defaults/"+p.name+"/"+strconv.Itoa(p.gen))
	if !c.WaitNone {
		zeroIfDefault(&c.Wait, min(worker.WaitDefault, (c.Window*2/3).Truncate(time.Second)), r)
	}
	zeroIfDefault(&c.Window, worker.WindowDefault, r)
	zeroIfDefault(&c.Ceiling, worker.CeilingDefault, r)
	zeroIfDefault(&c.BatchMax, core.BatchMax, r)
	zeroIfDefault(&c.Concurrency, worker.ConcurrencyDefault, r)
	zeroIfDefault(&c.Budget, worker.BudgetDefault, r)
	zeroIfDefault(&c.Grace, worker.GraceDefault, r)
	return c
}
