package sluicetest

import (
	"fmt"
	"math/rand"
	"sort"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim"
)

// Scenario is what a sweep runs: the user's handler, configuration and codec, a workload and
// the invariants.
type Scenario[A any] struct {
	// Config is the runner's configuration as in production, middleware and hooks included.
	// Capacity 0 means 4 here (the simulation does not read the CPU count); Logger, Clock and
	// Seed are the world's.
	Config sluice.Config
	// Codec is the payload codec (nil: sluice.JSON).
	Codec sluice.Codec[A]
	// Kind are the options of the scenario's kind as Register takes them (WithAttemptTimeout,
	// WithRate, WithConcurrency, WithKeyConcurrency, WithHoldOnDead...); with any, the
	// handler's jobs are of kind sluice.DefaultKind, registered with them. Jobs' own options
	// (WithKey, WithGroup, WithPriority...) are the Plan's.
	Kind []sluice.KindOption
	// Setup builds the handler over the world's simulated services; it runs once per run.
	Setup func(env *Env) sluice.Handler[A]
	// Workload plans the enqueues, cancels and retries, drawing from r.
	Workload func(r *rand.Rand, p *Plan[A])
	// Invariants are checked after every step and at the end (View.Final). Provided ones are
	// always checked too: "acknowledged jobs settle", "no effect after cancel", "success was
	// reported", "durable state survives a restart", "a graceful stop waits for its handlers"
	// and "a graceful stop keeps every outcome".
	Invariants []Invariant[A]
	// JobsMax bounds the enqueues a seed's knobs allow (default 8); Horizon is how long
	// faults are injected (default 30s of simulated time).
	JobsMax int
	Horizon time.Duration
	// StepsMax bounds one run (default 100,000 steps).
	StepsMax int
}

// Env gives Setup the world's services.
type Env struct {
	w *sched
}

// Service returns the simulated service name, creating it with faults on first use.
func (e *Env) Service(name string, faults ServiceFaults) *Service {
	for _, s := range e.w.services {
		if s.name == name {
			return s
		}
	}
	s := &Service{name: name, faults: faults.withDefaults(), w: e.w, kv: map[string]string{}, idem: map[string]Response{}}
	e.w.services = append(e.w.services, s)
	return s
}

// JobRef names a job of the plan; it is -1 for an enqueue the knobs dropped.
type JobRef int

type opKind uint8

const (
	opEnqueue opKind = iota + 1
	opCancel
	opRetry
)

type planOp[A any] struct {
	at      time.Duration
	kind    opKind
	due     time.Duration
	target  string
	payload A
	opts    []sluice.JobOption
	o       runner.Opts // opts as Kind.Enqueue applies them (the world sets it)
	ref     JobRef
}

// Plan collects a workload's operations; times count from the start of the run.
type Plan[A any] struct {
	ops     []planOp[A]
	refs    int
	jobsMax int
}

// Enqueue plans an enqueue at at, due at once, with the job's options as Kind.Enqueue takes
// them (WithKey, WithGroup, WithPriority, WithUnique...). WasDuplicate and FailOnDuplicate
// have no caller to answer here: a duplicate's ref names the job holding the key. An option
// refused is reported as a violation of "the workload's job options" at the start of the run.
func (p *Plan[A]) Enqueue(at time.Duration, target string, payload A, opts ...sluice.JobOption) JobRef {
	return p.EnqueueDue(at, at, target, payload, opts...)
}

// EnqueueDue plans an enqueue at at of a job due at due, with the job's options (Enqueue).
func (p *Plan[A]) EnqueueDue(at, due time.Duration, target string, payload A, opts ...sluice.JobOption) JobRef {
	if p.refs >= p.jobsMax {
		return -1
	}
	ref := JobRef(p.refs)
	p.refs++
	p.ops = append(p.ops, planOp[A]{at: at, kind: opEnqueue, due: due, target: target, payload: payload, opts: opts, ref: ref})
	return ref
}

// Cancel plans a cancel of j at at (skipped if j was not acknowledged by then).
func (p *Plan[A]) Cancel(at time.Duration, j JobRef) {
	if j >= 0 {
		p.ops = append(p.ops, planOp[A]{at: at, kind: opCancel, ref: j})
	}
}

// Retry plans a manual retry of j at at (refused unless j is dead by then).
func (p *Plan[A]) Retry(at time.Duration, j JobRef) {
	if j >= 0 {
		p.ops = append(p.ops, planOp[A]{at: at, kind: opRetry, ref: j})
	}
}

func (p *Plan[A]) sorted() []planOp[A] {
	sort.SliceStable(p.ops, func(i, j int) bool { return p.ops[i].at < p.ops[j].at })
	return p.ops
}

// Knobs are what a seed draws besides the workload's own randomness; shrinking lowers them.
type Knobs struct {
	Jobs          int  // enqueues allowed
	Crashes       int  // process crashes (at a time, after a service call, or inside a commit)
	Stops         int  // graceful stops
	DiskFaults    bool // the disk profile's faults (a failed write or fsync poisons the runner: a crash)
	ServiceFaults bool // the services' Fail, ApplyThenFail and Timeout
	Horizon       time.Duration
}

func (k Knobs) String() string {
	return fmt.Sprintf("jobs=%d,crashes=%d,stops=%d,disk=%d,svc=%d,horizon=%s",
		k.Jobs, k.Crashes, k.Stops, b2i(k.DiskFaults), b2i(k.ServiceFaults), k.Horizon)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// drawKnobs draws a seed's knobs.
func drawKnobs(seed int64, jobsMax int, horizon time.Duration) Knobs {
	r := sim.Stream(seed, "knobs")
	return Knobs{
		Jobs:          1 + r.Intn(jobsMax),
		Crashes:       r.Intn(4),
		Stops:         r.Intn(3),
		DiskFaults:    r.Intn(3) == 0,
		ServiceFaults: r.Intn(4) != 0,
		Horizon:       horizon,
	}
}

// JobView is a job as the world last saw it durable.
type JobView[A any] struct {
	ID       uint64
	Target   string
	Payload  A
	State    sluice.State
	Attempts int
	// Acked: its enqueue was acknowledged to the producer.
	Acked bool
}

// View is what an invariant reads.
type View[A any] struct{ w *world[A] }

// Now is the simulated time.
func (v View[A]) Now() time.Time { return v.w.now }

// Final reports the check at the end of the run (every job settled, no fault pending).
func (v View[A]) Final() bool { return v.w.final }

// Jobs returns every job the journal holds, ascending by id (the last durable state; while the
// process is down, the state before it went down).
func (v View[A]) Jobs() []JobView[A] { return v.w.jobs() }

// Calls returns every completed call to service, in order.
func (v View[A]) Calls(service string) []Call {
	for _, s := range v.w.services {
		if s.name == service {
			return s.Calls()
		}
	}
	return nil
}

// Effects returns the calls to service that took effect, in order.
func (v View[A]) Effects(service string) []Call {
	var out []Call
	for _, c := range v.Calls(service) {
		if c.Applied {
			out = append(out, c)
		}
	}
	return out
}

// Invariant is a named property; Check returns an error saying what broke.
type Invariant[A any] struct {
	Name  string
	Check func(v View[A]) error
}

// ExactlyOnce is the invariant "each key took effect on service at most once, and exactly
// once for every job that succeeded", where key maps a job's payload to its business key (the
// Request.Key the handler uses).
func ExactlyOnce[A any](service string, key func(payload A) string) Invariant[A] {
	return Invariant[A]{Name: "exactly-once " + service + " effect per key", Check: func(v View[A]) error {
		n, c := onceEach(v.Calls(service))
		if c != nil {
			return fmt.Errorf("key %q took effect %d times on %s (the last by attempt %d#%d at %s)",
				c.Key, n[c.Key], service, c.Job, c.Attempt, c.Done.Sub(epoch).Round(time.Millisecond))
		}
		if !v.Final() {
			return nil
		}
		for _, j := range v.Jobs() {
			if j.State == sluice.StateSucceeded && n[key(j.Payload)] != 1 {
				return fmt.Errorf("job %d succeeded but key %q took effect %d times on %s", j.ID, key(j.Payload), n[key(j.Payload)], service)
			}
		}
		return nil
	}}
}
