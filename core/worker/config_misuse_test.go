package worker

import (
	"errors"
	"math/rand"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/retry"
)

// badWorkerFields are the ways to break a worker.Config, each with the field its refusal
// must name; each derives its bad value from the drawn configuration.
var badWorkerFields = []struct {
	field string
	apply func(c *Config)
}{
	{"Window", func(c *Config) { c.Window += time.Second / 2 }},
	{"Window", func(c *Config) { c.Ceiling, c.Window = 0, CeilingDefault+time.Second }},
	{"Ceiling", func(c *Config) { c.Ceiling = c.Window - 1 }},
	{"Wait", func(c *Config) { c.Wait, c.WaitNone = -1-c.Wait, false }},
	{"Wait", func(c *Config) { c.Wait, c.WaitNone = c.Window, false }},
	{"BatchMax", func(c *Config) { c.BatchMax = core.BatchMax + 1 }},
	{"Concurrency", func(c *Config) { c.Concurrency = -1 - c.Concurrency }},
	{"Prefetch", func(c *Config) { c.Prefetch = -1 - c.Prefetch }},
	{"Budget", func(c *Config) { c.Budget = -1 - c.Budget }},
	{"RedriveMaxReceives", func(c *Config) { c.RedriveMaxReceives = -1 - c.RedriveMaxReceives }},
	{"Grace", func(c *Config) { c.Grace = -1 - c.Grace }},
	{"IdleDelay", func(c *Config) { c.IdleDelay = -1 - c.IdleDelay }},
	{"Lease.ReceiptsMax", func(c *Config) { c.Lease.ReceiptsMax = c.Concurrency + c.Prefetch + c.BatchMax - 1 }},
	{"ReceiveBackoff", func(c *Config) { c.ReceiveBackoff = []time.Duration{time.Second, -time.Second} }},
	{"Retry.Attempts", func(c *Config) { c.Retry.Attempts = -1 - c.Retry.Attempts }},
	{"Retry.Base", func(c *Config) { c.Retry.Base = -1 - c.Retry.Base }},
	{"Retry.Cap", func(c *Config) { c.Retry.Cap = max(1, c.Retry.Base/2); c.Retry.Base = 2 * c.Retry.Cap }},
	{"Retry.Deadline", func(c *Config) { c.Retry.Deadline = -1 - c.Retry.Deadline }},
	{"Lease.Pacing", func(c *Config) { c.Lease.Pacing = []time.Duration{time.Second, 0} }},
	{"Lease.Coalesce", func(c *Config) { c.Lease.Coalesce = -1 - c.Lease.Coalesce }},
	{"StopMargin", func(c *Config) { c.StopMargin = c.Window / 10 }},
}

// TestBadConfigIsRefusedNamingTheField: New with one field of a drawn valid configuration out
// of range is refused with an error wrapping ErrConfig that names the field (as its typed
// Field, and part by part in its text).
func TestBadConfigIsRefusedNamingTheField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		window := time.Duration(rapid.IntRange(3, 60).Draw(t, "windowS")) * time.Second
		wait := time.Duration(rapid.IntRange(0, 20).Draw(t, "waitS")) * time.Second
		wait = min(wait, max(time.Second, (window*2/3).Truncate(time.Second)))
		base := time.Duration(rapid.IntRange(100, 2000).Draw(t, "baseMs")) * time.Millisecond
		cfg := Config{
			Window: window, Ceiling: CeilingDefault, Wait: wait, WaitNone: wait == 0,
			BatchMax: rapid.IntRange(1, 10).Draw(t, "batchMax"), Concurrency: rapid.IntRange(1, 10).Draw(t, "concurrency"),
			Prefetch: rapid.IntRange(0, 3).Draw(t, "prefetch"), Budget: rapid.IntRange(2, 8).Draw(t, "budget"),
			Retry: retry.Policy{Attempts: 5, Base: base, Cap: base * time.Duration(rapid.IntRange(2, 31).Draw(t, "capFactor"))},
			Grace: time.Duration(rapid.IntRange(1, 30).Draw(t, "graceS")) * time.Second,
			Rand:  rand.New(rand.NewSource(1)),
		}
		if rapid.Bool().Draw(t, "redrive") {
			cfg.RedriveMaxReceives = rapid.IntRange(2, 6).Draw(t, "maxReceives")
			cfg.Budget = max(cfg.Budget, cfg.RedriveMaxReceives+1)
		}
		if _, err := New(cfg); err != nil {
			t.Fatalf("New with a good config %+v: %v", cfg, err)
		}
		for _, bad := range badWorkerFields {
			c := cfg
			bad.apply(&c)
			_, err := New(c)
			if err == nil {
				t.Fatalf("New accepted a config with a bad %s: %+v", bad.field, c)
			}
			var ce *ConfigError
			if errors.As(err, &ce) && ce.Field != bad.field {
				t.Fatalf("a bad %s was refused naming %s: %v", bad.field, ce.Field, err)
			}
			for _, part := range strings.Split(bad.field, ".") {
				if !strings.Contains(err.Error(), part) {
					t.Fatalf("the refusal of a bad %s does not name it: %v", bad.field, err)
				}
			}
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("a bad %s was refused with %v, which does not wrap %v", bad.field, err, ErrConfig)
			}
		}
	})
}
