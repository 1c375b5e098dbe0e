package sim

import (
	"math/rand"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/core/worker"
	"github.com/sluicehq/sluice/sim/config"
)

// Config is one run's whole configuration (sim/config draws it).
type Config = config.Config

// Defaults of a run.
const (
	SafetyDefault   = config.SafetyDefault
	StepsMaxDefault = config.StepsMaxDefault
)

// NewConfig draws the configuration of seed under profile (config.New).
func NewConfig(seed int64, profile string) (Config, error) { return config.New(seed, profile) }

// drawBetween draws a duration uniformly in [lo, hi] at millisecond grain.
func drawBetween(r *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.Int63n(int64((hi-lo)/time.Millisecond)+1))*time.Millisecond
}

// zeroWorkerDefaults writes some of the worker config's defaulted fields as zero
// (config.ZeroWorkerDefaults), drawing from the worker's own stream.
func (p *workerProc) zeroWorkerDefaults(c worker.Config) worker.Config {
	return config.ZeroWorkerDefaults(c, Stream(p.w.cfg.Seed, "defaults/"+p.name+"/"+strconv.Itoa(p.gen)))
}

// zeroRunnerDefaults writes some of the runner config's defaulted fields as zero.
func zeroRunnerDefaults(c *runner.Config, r *rand.Rand) { config.ZeroRunnerDefaults(c, r) }
