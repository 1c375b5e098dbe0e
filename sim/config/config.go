package config

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/retry"
	"github.com/sluicehq/sluice/sim/faults"
)

// Defaults of a run.
const (
	// SafetyDefault is the simulated length of the safety phase (faults on).
	SafetyDefault = 10 * time.Minute
	// StepsMaxDefault bounds the events of one run (both phases).
	StepsMaxDefault = 5_000_000
)

// Config is one run's whole configuration: the seed's swarm draws, or a profile's pins.
type Config struct {
	Seed    int64
	Profile string
	Faults  faults.Set

	Safety   time.Duration // safety phase length (faults on)
	StepsMax int

	// Runner side: Nodes runner processes, each with its own disk and journal.
	Nodes        int
	Capacity     int
	Attempts     int
	Base, Cap    time.Duration
	Deadline     time.Duration // 0: none
	Threshold    int
	Window       time.Duration // breaker window
	Cooldown     time.Duration
	Probes       int
	CompactBytes int64
	Retention    int  // terminal jobs kept at compaction
	Heavy        bool // the heavy workload shape was drawn
	Fleet        bool // the fleet family: the job layer on every worker (sim/fleet.go)
	// SyncDelay is how long a commit takes to start after the first command that asks for it
	// (an fsync in progress): commands arriving meanwhile share its batch (group commit).
	SyncDelay time.Duration
	Targets   int

	// Runner workload.
	JobEvery     time.Duration // mean gap between enqueues per node
	JobsMax      int           // enqueues per node in the safety phase
	CancelP      float64       // P(a producer tick cancels a random earlier job)
	HandlerMin   time.Duration
	HandlerMax   time.Duration
	PRetryable   float64 // outcome probabilities; the rest succeed
	PPermanent   float64
	PPanic       float64
	PRetryAfter  float64 // P(a retryable failure carries a server-requested wait)
	PCrashHandle float64 // P(a handler crashes its process) — a fault: off in liveness
	PPriority    float64 // P(a job gets a priority other than 0, drawn in [-5, 5])
	PBatch       float64 // P(a producer tick submits its jobs as one EnqueueMany)
	PUnique      float64 // P(a job gets a unique key, from a pool of 5)
	// Schedules bounds the periodic jobs' schedules per node: half the seeds draw 1 to 3 from
	// their own stream (sim/runner_schedule.go), never more than this; the shrinker lowers it.
	Schedules int
	// KindLimits are the limits of the runner's three kinds (mail, sms, bulk; 0: none); each
	// job's kind is drawn from the kinds stream.
	KindLimits [3]int
	// Flow control (flow.go): on for the flow profile and one swarm seed in four with runner
	// nodes; then each kind's settings, and P(a producer tick pauses or resumes a kind).
	FlowOn bool
	Flow   [3]KindFlow
	PPause float64

	// Queue side: Workers worker processes on one queue.
	Workers    int
	Visibility time.Duration // W, whole seconds
	ReceiveMax int           // 1..10
	PollWait   time.Duration // long-poll wait
	MaxReceive int           // redrive to the dead-letter queue at this count; 0: none
	Budget     int           // retire a delivery at this receive count
	MsgEvery   time.Duration
	MsgsMax    int
	PMsgRetry  float64 // handler outcome probabilities; the rest ack
	PMsgPerm   float64
	PPoison    float64 // P(a message body is undecodable)
	Lapsed     string  // how the queue answers an extension of a lapsed receipt

	// Worker engine.
	Concurrency  int           // handlers at once per worker
	Prefetch     int           // deliveries held waiting beyond Concurrency
	Grace        time.Duration // shutdown grace
	MsgBase      time.Duration // release backoff policy
	MsgCap       time.Duration
	PMsgTerminal float64 // P(a handler asks for a terminal backoff)
}

// PickFaults draws the fault mix from r (the seed's "swarm" stream, which New goes on drawing
// from) and the later families' own streams. sluicetest's worlds draw theirs the same way.
func PickFaults(r *rand.Rand, seed int64, profile string) (faults.Set, error) {
	fs, err := faults.Pick(profile, r)
	if err != nil {
		return faults.Set{}, err
	}
	if err := fs.PickMore(Stream(seed, "swarm-more")); err != nil {
		return faults.Set{}, err
	}
	if err := fs.PickJournal(Stream(seed, "swarm-journal")); err != nil {
		return faults.Set{}, err
	}
	return fs, nil
}

// New draws the configuration of seed under profile from the seed's "swarm" stream.
// Every profile draws the same values in the same order; profiles only pin some of them.
func New(seed int64, profile string) (Config, error) {
	r := Stream(seed, "swarm")
	fs, err := PickFaults(r, seed, profile)
	if err != nil {
		return Config{}, err
	}
	c := Config{Seed: seed, Profile: profile, Faults: fs, Safety: SafetyDefault, StepsMax: StepsMaxDefault}
	c.drawRunner(r)
	c.drawQueue(r)
	// The job options' probabilities come from their own stream, so adding them left every
	// other draw of the swarm stream as it was.
	jr := Stream(seed, "job-options")
	c.PPriority = []float64{0, 0.3, 0.9}[jr.Intn(3)]
	c.PBatch = []float64{0, 0.2, 0.6}[jr.Intn(3)]
	c.PUnique = []float64{0, 0.3, 0.8}[jr.Intn(3)]
	if jr.Intn(8) == 0 {
		// The retry policy's documented backoff (which the nodes may then write as zero).
		p := retry.DefaultPolicy()
		c.Base, c.Cap = p.Base, p.Cap
	}
	c.Schedules = 3
	// The kinds' limits come from their own stream too.
	kr := Stream(seed, "kind-limits")
	c.KindLimits = [3]int{kr.Intn(3), kr.Intn(2), 0}
	// The fleet family (swarm: one seed in four with workers) is drawn from its own stream
	// too, so a seed whose family is off runs exactly as before.
	fleetOn := profile == "fleet" || profile == "swarm" && c.Workers > 0 && Stream(seed, "fleet").Intn(4) == 0

	c.pinProfile(r)
	c.drawFlow(seed)
	if fleetOn {
		// The runner side's policy and breaker draws configure the job layer; the worker's
		// budget and redrive are the job layer's own (sim/fleet.go).
		c.Fleet = true
		c.PPoison, c.MaxReceive = 0, 0
		c.Workers = max(c.Workers, 2)
		c.Budget = 3*c.Attempts + 5 // the liveness bound's deliveries per message
		c.MsgCap = max(c.MsgCap, c.Cap+c.Cooldown)
	}
	return c, c.Validate()
}

// drawRunner draws the runner side's engine and workload from r.
func (c *Config) drawRunner(r *rand.Rand) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.Intn(hi-lo+1)) * time.Millisecond }
	s := func(lo, hi int) time.Duration { return time.Duration(lo+r.Intn(hi-lo+1)) * time.Second }
	c.Nodes = 1 + r.Intn(2)
	c.Capacity = 1 + r.Intn(8)
	c.Attempts = 1 + r.Intn(6)
	c.Base = ms(100, 2000)
	c.Cap = c.Base * time.Duration(2+r.Intn(30))
	if r.Intn(3) == 0 {
		c.Deadline = s(20, 300)
	}
	c.Threshold = 1 + r.Intn(5)
	c.Window = s(5, 60)
	c.Cooldown = s(1, 30)
	c.Probes = 1 + r.Intn(2)
	c.CompactBytes = []int64{2 << 10, 16 << 10, 64 << 20}[r.Intn(3)]
	c.Targets = 1 + r.Intn(4)

	c.JobEvery = ms(200, 5000)
	c.JobsMax = 10 + r.Intn(150)
	c.CancelP = []float64{0, 0.02, 0.1}[r.Intn(3)]
	c.HandlerMin = ms(1, 200)
	c.HandlerMax = c.HandlerMin + ms(0, 10000)
	c.PRetryable = r.Float64() * 0.4
	c.PPermanent = r.Float64() * 0.1
	c.PPanic = r.Float64() * 0.05
	c.PRetryAfter = r.Float64() * 0.3
	c.PCrashHandle = r.Float64() * 0.01
}

// drawQueue draws the queue side's workers, workload and engine, the journal's retention and
// sync delay, and the heavy workload shape from r.
func (c *Config) drawQueue(r *rand.Rand) {
	ms := func(lo, hi int) time.Duration { return time.Duration(lo+r.Intn(hi-lo+1)) * time.Millisecond }
	s := func(lo, hi int) time.Duration { return time.Duration(lo+r.Intn(hi-lo+1)) * time.Second }
	c.Workers = 1 + r.Intn(3)
	c.Visibility = s(3, 60)
	c.ReceiveMax = 1 + r.Intn(10)
	c.PollWait = s(0, 20) // 0: short polls (worker.Config.WaitNone)
	if limit := (c.Visibility * 2 / 3).Truncate(time.Second); c.PollWait > limit {
		// core/worker refuses a long poll over two thirds of the window: a receive's stamp is
		// read before the call (docs/worker.md), so a message that arrives late in a longer poll is
		// dropped as late on every delivery (docs/simulator.md bug 1, seeds 276 and 212).
		c.PollWait = max(time.Second, limit)
	}
	if r.Intn(2) == 0 {
		c.MaxReceive = 2 + r.Intn(5)
	}
	c.Budget = 2 + r.Intn(6)
	if c.MaxReceive > 0 && c.Budget < c.MaxReceive+1 {
		c.Budget = c.MaxReceive + 1
	}
	c.MsgEvery = ms(100, 5000)
	c.MsgsMax = 10 + r.Intn(150)
	c.PMsgRetry = r.Float64() * 0.4
	c.PMsgPerm = r.Float64() * 0.1
	c.PPoison = r.Float64() * 0.05
	c.Lapsed = []string{"gone", "ignore", "extend", "mixed"}[r.Intn(4)]

	c.Concurrency = 1 + r.Intn(10)
	c.Prefetch = r.Intn(4)
	c.Grace = s(1, 30)
	c.MsgBase = ms(100, 2000)
	c.MsgCap = c.MsgBase * time.Duration(2+r.Intn(30))
	c.PMsgTerminal = r.Float64() * 0.03
	c.Retention = []int{1, 5, 50, 10_000}[r.Intn(4)]
	c.SyncDelay = []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond}[r.Intn(4)]
	if r.Intn(8) == 0 {
		// A heavy workload shape: several times the jobs and messages, arriving ten times as fast.
		c.JobsMax *= 4
		c.JobEvery /= 10
		c.MsgsMax *= 4
		c.MsgEvery /= 10
		c.Heavy = true
	}
}

// pinProfile pins what the profile fixes (its compaction draw comes from r).
func (c *Config) pinProfile(r *rand.Rand) {
	switch c.Profile {
	case "calm":
		c.PCrashHandle = 0
	case "disk":
		c.CompactBytes = []int64{1 << 10, 4 << 10}[r.Intn(2)]
		c.Workers = 0
	case "network":
		c.Nodes = 0
		c.PCrashHandle = 0
	case "fleet":
		c.Nodes, c.PCrashHandle = 0, 0
	case "bitflip":
		c.Workers = 0
		c.PCrashHandle = 0
	case "swarm":
		if !c.Faults.Process.On() {
			c.PCrashHandle = 0
		}
	case "flow":
		c.Workers = 0
		c.Nodes = max(c.Nodes, 1)
		if !c.Faults.Process.On() {
			c.PCrashHandle = 0
		}
	}
}

// Validate reports a configuration the world cannot run.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 0 || c.Workers < 0 || c.Nodes+c.Workers == 0:
		return fmt.Errorf("sim: config needs at least one runner node or worker (nodes=%d workers=%d)", c.Nodes, c.Workers)
	case c.Nodes > 0 && (c.Capacity < 1 || c.Attempts < 1 || c.Probes < 1 || c.Threshold < 1):
		return fmt.Errorf("sim: runner config needs capacity, attempts, probes and threshold >= 1")
	case c.Workers > 0 && (c.Visibility < time.Second || c.Visibility%time.Second != 0):
		return fmt.Errorf("sim: visibility %v is not whole seconds >= 1s", c.Visibility)
	case c.Workers > 0 && (c.ReceiveMax < 1 || c.ReceiveMax > 10):
		return fmt.Errorf("sim: receive max %d outside 1..10", c.ReceiveMax)
	case c.Safety <= 0 || c.StepsMax <= 0:
		return fmt.Errorf("sim: safety phase %v and steps max %d must be positive", c.Safety, c.StepsMax)
	}
	return c.Faults.Validate()
}

// String renders the configuration in a fixed order (the summary's config lines).
func (c Config) String() string {
	var b strings.Builder
	shape := "light"
	if c.Heavy {
		shape = "heavy"
	}
	fleet := "off"
	if c.Fleet {
		fleet = "on"
	}
	fmt.Fprintf(&b, "profile %s, safety phase %s, steps max %d, workload %s, fleet %s\n", c.Profile, c.Safety, c.StepsMax, shape, fleet)
	if c.Nodes > 0 {
		dl := "none"
		if c.Deadline > 0 {
			dl = c.Deadline.String()
		}
		fmt.Fprintf(&b, "runner: nodes=%d capacity=%d policy={attempts=%d base=%s cap=%s deadline=%s} breaker={threshold=%d window=%s cooldown=%s probes=%d} compact=%d retention=%d targets=%d sync-delay=%s\n",
			c.Nodes, c.Capacity, c.Attempts, c.Base, c.Cap, dl, c.Threshold, c.Window, c.Cooldown, c.Probes, c.CompactBytes, c.Retention, c.Targets, c.SyncDelay)
		fmt.Fprintf(&b, "runner workload: jobs=%d every~%s cancel=%s handler=%s..%s retryable=%s permanent=%s panic=%s retry-after=%s crash=%s kind-limits={mail=%d sms=%d bulk=%d}\n",
			c.JobsMax, c.JobEvery, pct(c.CancelP), c.HandlerMin, c.HandlerMax, pct(c.PRetryable), pct(c.PPermanent), pct(c.PPanic), pct(c.PRetryAfter), pct(c.PCrashHandle),
			c.KindLimits[0], c.KindLimits[1], c.KindLimits[2])
		if c.FlowOn {
			fmt.Fprintf(&b, "runner flow: pause=%s mail={%s} sms={%s} bulk={%s}\n", pct(c.PPause), c.Flow[0], c.Flow[1], c.Flow[2])
		}
	}
	if c.Workers > 0 {
		fmt.Fprintf(&b, "queue: workers=%d window=%s receive-max=%d poll=%s max-receive=%d budget=%d lapsed=%s\n",
			c.Workers, c.Visibility, c.ReceiveMax, c.PollWait, c.MaxReceive, c.Budget, c.Lapsed)
		fmt.Fprintf(&b, "queue worker: concurrency=%d prefetch=%d grace=%s release-backoff=%s..%s\n",
			c.Concurrency, c.Prefetch, c.Grace, c.MsgBase, c.MsgCap)
		fmt.Fprintf(&b, "queue workload: messages=%d every~%s retry=%s permanent=%s terminal=%s poison=%s\n",
			c.MsgsMax, c.MsgEvery, pct(c.PMsgRetry), pct(c.PMsgPerm), pct(c.PMsgTerminal), pct(c.PPoison))
	}
	f := c.Faults
	fmt.Fprintf(&b, "faults: disk={%s} damage-expects-refusal=%t lost-sector=%s\n", diskString(f.Disk), f.ExpectRefusal, pct(f.LostSector))
	t := f.Transport
	fmt.Fprintf(&b, "faults: transport={fail-before=%s fail-after=%s throttle=%s 5xx=%s stale=%s fatal=%s breach=%s latency=%s..%s spike=%s %s..%s}\n",
		pct(t.FailBefore), pct(t.FailAfter), pct(t.Throttle), pct(t.ServerError), pct(t.Stale), pct(t.Fatal), pct(t.Breach),
		t.LatencyMin, t.LatencyMax, pct(t.Spike), t.SpikeMin, t.SpikeMax)
	p := f.Process
	fmt.Fprintf(&b, "faults: process={node-crash=%s commit-crash=%s crash-point=%s close-point=%s worker-crash=%s restart=%s..%s} timing={long-handler=%s x%s marathon=%s burst=%s of %d}\n",
		pct(p.NodeCrash), pct(p.CommitCrash), pct(p.CrashPoint), pct(p.ClosePoint), pct(p.WorkerCrash), p.RestartMin, p.RestartMax,
		pct(f.Timing.LongHandler), strconv.FormatFloat(f.Timing.LongFactor, 'f', 1, 64), pct(f.Timing.Marathon), pct(f.Timing.Burst), f.Timing.BurstSize)
	fmt.Fprintf(&b, "faults: schedule={late=%s up to %s bunch=%s reorder=%s}\n", pct(f.Timing.Late), f.Timing.LateMax, f.Timing.Bunch, pct(f.Timing.Reorder))
	return b.String()
}

// pct renders a probability as a percentage with three decimals, deterministically.
func pct(p float64) string { return strconv.FormatFloat(p*100, 'f', 3, 64) + "%" }

// diskString renders the disk fault probabilities in a fixed order with fixed precision.
func diskString(d faults.Disk) string {
	var parts []string
	for _, p := range []struct {
		name string
		v    float64
	}{{"write", d.WriteErr}, {"sync", d.SyncErr}, {"rename", d.RenameErr}, {"create", d.CreateErr},
		{"remove", d.RemoveErr}, {"truncate", d.TruncateErr}, {"syncdir", d.SyncDirErr},
		{"dir-persist", d.DirPersist}, {"bitflip", d.BitFlip}, {"open", d.OpenErr}, {"stat", d.StatErr},
		{"size", d.SizeErr}, {"read", d.ReadErr}, {"close", d.CloseErr},
		{"short-write", d.ShortWrite}, {"leftover", d.LeftoverErr}} {
		if p.v != 0 {
			parts = append(parts, p.name+"="+pct(p.v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}
