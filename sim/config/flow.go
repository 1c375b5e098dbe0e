package config

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/flow"
	"github.com/sluicehq/sluice/core/runner"
)

// KindFlow is one runner kind's drawn flow control: its KindConfig settings and how its jobs
// draw their flow options (Job).
type KindFlow struct {
	Rate, KeyRate flow.Rate
	KeyLimit      int
	Fair          bool
	Timeout       time.Duration // the kind's attempt timeout; 0: none
	Hold          bool          // its grouped jobs hold their group when dead
	PKey          float64       // P(a job has a flow key)
	PGroup        float64       // P(a job is in a group)
	PTimeout      float64       // P(a job has its own timeout)
}

// FlowKeys and FlowGroups bound the flow keys and groups a kind's jobs use: few, so that keys
// contend and groups queue.
const (
	FlowKeys   = 4
	FlowGroups = 3
)

// SwarmFlow turns the flow family on for one swarm seed in four with runner nodes (false: the
// flow profile only).
const SwarmFlow = true

// drawFlow draws flow control from the seed's own "flow" stream (so no other draw moves): on
// under the flow profile, for one swarm seed in four with runner nodes, off otherwise.
func (c *Config) drawFlow(seed int64) {
	r := Stream(seed, "flow")
	on := r.Intn(4) == 0
	if c.Profile != "flow" && (c.Profile != "swarm" || !on || !SwarmFlow) || c.Nodes == 0 {
		return
	}
	c.FlowOn = true
	c.PPause = []float64{0, 0.02, 0.08}[r.Intn(3)]
	rate := func(perMax int) flow.Rate {
		return flow.Rate{Count: 1 + r.Intn(4), Per: time.Duration(1+r.Intn(perMax)) * time.Second, Burst: r.Intn(4)}
	}
	for k := range c.Flow {
		f := &c.Flow[k]
		switch r.Intn(5) {
		case 1: // fair share alone: the fair-share check's kind
			f.Fair = true
		case 2:
			f.KeyLimit = 1 + r.Intn(3)
		case 3:
			f.KeyRate = rate(5)
		case 4:
			f.KeyLimit, f.KeyRate = 1+r.Intn(2), rate(5)
		}
		if r.Intn(3) == 0 {
			f.Rate = rate(3)
		}
		if r.Intn(3) == 0 {
			f.Timeout = drawDur(r, c.HandlerMin, c.HandlerMax)
		}
		f.Hold = r.Intn(2) == 0
		f.PKey = []float64{0.5, 0.9, 1}[r.Intn(3)]
		if !f.Fair {
			f.PGroup = []float64{0, 0.3, 0.7}[r.Intn(3)]
		}
		f.PTimeout = []float64{0, 0.1}[r.Intn(2)]
	}
}

func drawDur(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return (lo + time.Duration(r.Int63n(int64(hi-lo)+1))).Round(time.Millisecond)
}

// Apply sets kc's flow settings.
func (f KindFlow) Apply(kc *runner.KindConfig) {
	kc.Rate, kc.KeyRate, kc.KeyLimit, kc.Fair, kc.Timeout = f.Rate, f.KeyRate, f.KeyLimit, f.Fair, f.Timeout
}

// Job draws a job's flow options into o from r (a node's own "flow-jobs" stream): a key
// skewed toward the first ones, a group (holding when the kind says), its own timeout. A fair
// kind's jobs get priority 0: the fair-share bound holds among equal priorities. It reports
// whether the kind is fair.
func (f KindFlow) Job(r *rand.Rand, o *runner.Opts, c *Config) bool {
	if r.Float64() < f.PKey {
		o.Key = "k" + strconv.Itoa(r.Intn(1+r.Intn(FlowKeys)))
	}
	if r.Float64() < f.PGroup {
		o.Group = "g" + strconv.Itoa(r.Intn(FlowGroups))
		o.Hold = f.Hold
	}
	if r.Float64() < f.PTimeout {
		o.Timeout = drawDur(r, c.HandlerMin, c.HandlerMax)
	}
	if f.Fair {
		o.Priority = 0
	}
	return f.Fair
}

// String renders f in a fixed order.
func (f KindFlow) String() string {
	var parts []string
	if f.Rate.On() {
		parts = append(parts, "rate="+rateString(f.Rate))
	}
	if f.KeyRate.On() {
		parts = append(parts, "key-rate="+rateString(f.KeyRate))
	}
	if f.KeyLimit > 0 {
		parts = append(parts, "key-limit="+strconv.Itoa(f.KeyLimit))
	}
	if f.Fair {
		parts = append(parts, "fair")
	}
	if f.Timeout > 0 {
		parts = append(parts, "timeout="+f.Timeout.String())
	}
	if f.PGroup > 0 {
		parts = append(parts, "groups="+pct(f.PGroup))
		if f.Hold {
			parts = append(parts, "hold")
		}
	}
	parts = append(parts, "keys="+pct(f.PKey))
	if f.PTimeout > 0 {
		parts = append(parts, "job-timeouts="+pct(f.PTimeout))
	}
	return strings.Join(parts, " ")
}

func rateString(r flow.Rate) string {
	return fmt.Sprintf("%d/%s burst %d", r.Count, r.Per, r.BurstSize())
}
