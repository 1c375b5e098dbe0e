package qjobs

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/flow"
	"pgregory.net/rapid"
)

// flowHost is a machine with kind "mail" registered under f.
func flowHost(t *testing.T, cfg Config, f Flow) *Machine {
	t.Helper()
	m := newMachine(t, cfg)
	if err := m.Step(Register{Kind: "mail", Flow: f}); err != nil {
		t.Fatal(err)
	}
	return m
}

func keyed(key string) Attrs { a := job("smtp"); a.Key = key; return a }

// render is a Ready of one delivery on one line.
func render(rd Ready) string {
	switch {
	case len(rd.Runs) == 1:
		s := "run " + strconv.Itoa(rd.Runs[0].Attempt)
		if rd.Runs[0].Delay > 0 {
			s += " after=" + rd.Runs[0].Delay.String()
		}
		if rd.Runs[0].Timeout > 0 {
			s += " timeout=" + rd.Runs[0].Timeout.String()
		}
		return s
	case len(rd.Sends) == 1:
		s := rd.Sends[0]
		out := s.String() + " waits=" + strconv.Itoa(s.Attrs.Waits)
		if s.Attrs.LastErr != "" {
			out += " err=" + s.Attrs.LastErr
		}
		return out
	case len(rd.Done) == 1:
		return rd.Done[0].String() + " (" + rd.Done[0].Err + ")"
	}
	return fmt.Sprintf("%+v", rd)
}

// TestFlowDecisions walks the limits of one process through the host: each line is a
// delivery (or an attempt's end) and the one effect it gets.
func TestFlowDecisions(t *testing.T) {
	sec := time.Second
	type stepT struct {
		at      time.Duration // after t0
		receipt string
		a       Attrs
		done    bool // an AttemptDone (success) for receipt instead of a delivery
		want    string
	}
	waited := func(a Attrs, n int) Attrs { a.Waits = n; return a }
	withTimeout := func(a Attrs, d time.Duration) Attrs { a.Timeout = d; return a }
	for _, tc := range []struct {
		name  string
		cfg   func(*Config)
		flow  Flow
		steps []stepT
	}{
		{"a key limit of 1: key a's waiters come back one expected slot apart (1 s before any attempt ended, then the mean attempt time), key b runs",
			nil, Flow{KeyLimit: 1}, []stepT{
				{0, "r1", keyed("a"), false, "run 1"},
				{0, "r2", keyed("a"), false, "send wait to queue attempts=0 delay=1s waits=1"},
				{0, "r3", keyed("b"), false, "run 1"},
				{sec, "r4", waited(keyed("a"), 3), false, "send wait to queue attempts=0 delay=1s waits=4"},
				{sec, "r5", keyed("a"), false, "send wait to queue attempts=0 delay=2s waits=1"},
				{4 * sec, "r1", keyed("a"), true, "done delete ()"}, // took 4 s: the mean
				{4 * sec, "r6", keyed("a"), false, "run 1"},
				{4 * sec, "r7", keyed("a"), false, "send wait to queue attempts=0 delay=4s waits=1"},
				{4 * sec, "r8", keyed("a"), false, "send wait to queue attempts=0 delay=8s waits=1"},
				{4 * sec, "r9", job("smtp"), false, "run 1"}, // no key: the key ""
			}},
		{"a kind rate of 1/s starts empty: a start up to a second ahead is held for; beyond, waiters come back one interval apart",
			nil, Flow{Rate: flow.Rate{Count: 1, Per: sec}}, []stepT{
				{0, "r1", keyed("a"), false, "run 1 after=1s"},
				{0, "r2", keyed("b"), false, "send wait to queue attempts=0 delay=2s waits=1"},
				{0, "r3", keyed("c"), false, "send wait to queue attempts=0 delay=3s waits=1"},
				{sec, "r4", keyed("a"), false, "run 1 after=1s"},
				{sec, "r5", keyed("a"), false, "send wait to queue attempts=0 delay=3s waits=1"},
				{2 * sec, "r6", keyed("b"), false, "run 1 after=1s"},
			}},
		{"a key rate: each key its own bucket",
			nil, Flow{KeyRate: flow.Rate{Count: 2, Per: sec, Burst: 2}}, []stepT{
				{0, "r0", keyed("z"), false, "run 1 after=500ms"},
				{sec, "r1", keyed("a"), false, "run 1"},
				{sec, "r2", keyed("a"), false, "run 1"},
				{sec, "r3", keyed("a"), false, "run 1 after=500ms"},
				{sec, "r4", keyed("a"), false, "run 1 after=1s"},
				{sec, "r5", keyed("a"), false, "send wait to queue attempts=0 delay=2s waits=1"},
				{sec, "r6", keyed("b"), false, "run 1"},
			}},
		{"a job past WaitMax is dead-lettered, carrying its waits",
			func(c *Config) { c.WaitMax = 3 }, Flow{KeyLimit: 1}, []stepT{
				{0, "r1", keyed("a"), false, "run 1"},
				{0, "r2", waited(keyed("a"), 2), false, "send wait to queue attempts=0 delay=1s waits=3"},
				{0, "r3", waited(keyed("a"), 3), false, "send dead to dead-letter attempts=0 delay=0s reason=flow-waits waits=3 err=3 flow waits in the queue (last: key \"a\" is at its limit (1 running))"},
			}},
		{"FIFO: a flow wait hides the message (its group keeps its order)",
			func(c *Config) { c.FIFO = true }, Flow{KeyLimit: 1}, []stepT{
				{0, "r1", keyed("a"), false, "run 1"},
				{0, "r2", keyed("a"), false, "done hide 1s (flow wait: key \"a\" is at its limit (1 running))"},
			}},
		{"the timeout: the kind's, the job's instead, never past the visibility limit",
			nil, Flow{Timeout: 5 * sec}, []stepT{
				{0, "r1", job("smtp"), false, "run 1 timeout=5s"},
				{0, "r2", withTimeout(job("smtp"), 2*sec), false, "run 1 timeout=2s"},
				{0, "r3", withTimeout(job("smtp"), 24*time.Hour), false, "run 1 timeout=11h59m30s"},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			m := flowHost(t, cfg, tc.flow)
			for i, s := range tc.steps {
				now := t0.Add(s.at)
				var got string
				if s.done {
					got = render(step(t, m, AttemptDone{Receipt: s.receipt, Now: now, Outcome: Outcome{Result: Success}}))
				} else {
					out := Encode(s.a, []byte("p"))
					got = render(step(t, m, Deliver{Now: now, Receipt: s.receipt, Message: message(out, 1)}))
				}
				if got != s.want {
					t.Errorf("step %d (%s at +%v):\n got %s\nwant %s", i, s.receipt, s.at, got, s.want)
				}
			}
		})
	}
}

// message is out as delivered for the n-th time.
func message(out core.Outgoing, n int) core.Message {
	return core.Message{ID: "m", Body: out.Body, Attributes: out.Attributes, ReceiveCount: n}
}

// drawer draws the choices of a flow run: rapid's (shrinking) or a seeded source's.
type drawer interface {
	draw(lo, hi int, label string) int
}

type rapidDraw struct{ t *rapid.T }

func (d rapidDraw) draw(lo, hi int, label string) int { return rapid.IntRange(lo, hi).Draw(d.t, label) }

type seededDraw struct{ r *rand.Rand }

func (d seededDraw) draw(lo, hi int, _ string) int { return lo + d.r.Intn(hi-lo+1) }

// runFlow drives one process's job layer (and its restarts) with deliveries of three keys,
// attempt ends and time steps, all drawn, under drawn limits, and checks the limiter against a
// plain model: a key never runs more than KeyLimit attempts at once in one process; over every
// window the starts of the kind and of each key stay within Rate.Allowed and KeyRate.Allowed,
// across restarts too; with no rate a delivery waits only when its key is at its limit; an
// attempt's timeout is the job's, else the kind's, cut to the visibility limit; and the
// machine's own invariants hold after every step.
func runFlow(d drawer, def Defect) error {
	sec := time.Second
	var f Flow
	f.KeyLimit = d.draw(0, 2, "keyLimit")
	if d.draw(0, 1, "rate") == 1 {
		f.Rate = flow.Rate{Count: d.draw(1, 3, "rate.count"), Per: time.Duration(d.draw(1, 3, "rate.per")) * sec, Burst: d.draw(0, 3, "rate.burst")}
	}
	if d.draw(0, 1, "keyRate") == 1 {
		f.KeyRate = flow.Rate{Count: d.draw(1, 2, "keyRate.count"), Per: time.Duration(d.draw(1, 3, "keyRate.per")) * sec, Burst: d.draw(0, 2, "keyRate.burst")}
	}
	f.Timeout = []time.Duration{0, 5 * sec}[d.draw(0, 1, "timeout")]
	cfg := testConfig()
	cfg.Circuit.Threshold = 1 << 20 // outcomes are drawn: keep every breaker closed
	cfg.Defect = def
	cfg.FIFO = d.draw(0, 3, "fifo") == 0
	newProc := func() (*Machine, error) {
		m, err := New(cfg)
		if err != nil {
			return nil, err
		}
		return m, m.Step(Register{Kind: "mail", Flow: f})
	}
	m, err := newProc()
	if err != nil {
		return err
	}
	keys := []string{"a", "b", ""}
	now := t0
	running := map[string]string{} // receipt → key, this process's
	var order []string             // running receipts, in start order
	var kindStarts []time.Time
	keyStarts := map[string][]time.Time{}
	startAt := map[string]time.Time{} // running receipt → when its handler starts (held: later)
	started := func(r string) {       // r's handler started (the process did not die before)
		kindStarts = append(kindStarts, startAt[r])
		keyStarts[running[r]] = append(keyStarts[running[r]], startAt[r])
	}
	n := 0
	for range d.draw(1, 80, "steps") {
		switch d.draw(0, 5, "action") {
		case 0, 1, 2: // a delivery
			n++
			r := "r" + strconv.Itoa(n)
			a := keyed(keys[d.draw(0, 2, "key")])
			a.Timeout = []time.Duration{0, 2 * sec, 24 * time.Hour}[d.draw(0, 2, "jobTimeout")]
			busy := 0
			for _, k := range running {
				if k == a.Key {
					busy++
				}
			}
			if err := m.Step(Deliver{Now: now, Receipt: r, Message: message(Encode(a, []byte("p")), 1)}); err != nil {
				return err
			}
			rd := m.Ready()
			waited := len(rd.Sends) == 1 && rd.Sends[0].Why == WhyWait || len(rd.Done) == 1 && rd.Done[0].Disposition == Hide
			if waited && !f.Rate.On() && !f.KeyRate.On() && (f.KeyLimit == 0 || busy < f.KeyLimit) {
				return fmt.Errorf("at +%v key %q waits with %d running, its limit %d, no rate", now.Sub(t0), a.Key, busy, f.KeyLimit)
			}
			switch {
			case len(rd.Runs) == 1:
				if f.KeyLimit > 0 && busy+1 > f.KeyLimit {
					return fmt.Errorf("at +%v key %q starts attempt %d at once, its limit is %d", now.Sub(t0), a.Key, busy+1, f.KeyLimit)
				}
				want := a.Timeout
				if want == 0 {
					want = f.Timeout
				}
				if want > 0 {
					want = min(want, VisibilityMaxDefault-cfg.Margin-rd.Runs[0].Delay)
				}
				if got := rd.Runs[0].Timeout; got != want {
					return fmt.Errorf("a run's timeout %v, want %v (job %v, kind %v)", got, want, a.Timeout, f.Timeout)
				}
				if dl := rd.Runs[0].Delay; dl < 0 || dl > HoldMax {
					return fmt.Errorf("a run held %v, out of [0, %v]", dl, HoldMax)
				}
				running[r] = a.Key
				order = append(order, r)
				startAt[r] = now.Add(rd.Runs[0].Delay)
			case len(rd.Sends) == 1 && rd.Sends[0].Why == WhyWait:
				if dl := rd.Sends[0].Message.Delay; dl < sec || dl > DelayMaxDefault {
					return fmt.Errorf("a wait's delay %v out of [1s, %v]", dl, DelayMaxDefault)
				}
				if err := m.Step(SendDone{Receipt: r, Now: now}); err != nil {
					return err
				}
				m.Ready()
			case cfg.FIFO && len(rd.Done) == 1 && rd.Done[0].Disposition == Hide:
				// A FIFO wait hides the message, for at least a second.
				if v := rd.Done[0].Visibility; v < sec || v > VisibilityMaxDefault {
					return fmt.Errorf("a FIFO wait hides for %v", v)
				}
			default:
				return fmt.Errorf("a delivery got %s", render(rd))
			}
		case 3: // an attempt ends
			if len(order) == 0 {
				continue
			}
			i := d.draw(0, len(order)-1, "which")
			r := order[i]
			cancelled := d.draw(0, 3, "cancelled") == 0
			if now.Before(startAt[r]) {
				cancelled = true // held, stopped before its start: it never ran
			} else {
				started(r)
			}
			order = append(order[:i], order[i+1:]...)
			delete(running, r)
			delete(startAt, r)
			if err := m.Step(AttemptDone{Receipt: r, Now: now, Outcome: Outcome{Result: Success}, Cancelled: cancelled}); err != nil {
				return err
			}
			m.Ready()
		case 4: // time passes
			now = now.Add(time.Duration(d.draw(0, 1500, "ms")) * time.Millisecond)
		case 5: // a crash and a restart: the process's attempts die with it
			if d.draw(0, 3, "restart") != 0 {
				continue
			}
			if m, err = newProc(); err != nil {
				return err
			}
			for _, r := range order {
				if !now.Before(startAt[r]) {
					started(r)
				}
			}
			running, order, startAt = map[string]string{}, nil, map[string]time.Time{}
		}
		if err := m.CheckInvariants(); err != nil {
			return err
		}
	}
	for _, r := range order { // the process goes on: held ones start too
		started(r)
	}
	if err := withinRate(f.Rate, kindStarts, "the kind"); err != nil {
		return err
	}
	for _, k := range keys {
		if err := withinRate(f.KeyRate, keyStarts[k], "key "+strconv.Quote(k)); err != nil {
			return err
		}
	}
	return nil
}

// withinRate checks that every window of starts holds at most r.Allowed.
func withinRate(r flow.Rate, starts []time.Time, who string) error {
	if !r.On() {
		return nil
	}
	slices.SortFunc(starts, time.Time.Compare)
	for i := range starts {
		for j := i; j < len(starts); j++ {
			w := starts[j].Sub(starts[i])
			if n := int64(j - i + 1); n > r.Allowed(w) {
				return fmt.Errorf("%s started %d attempts within %v under %+v (allowed %d)", who, n, w, r, r.Allowed(w))
			}
		}
	}
	return nil
}

func TestFlowLimiterHoldsItsPromises(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		if err := runFlow(rapidDraw{t}, NoDefect); err != nil {
			t.Fatal(err)
		}
	})
}

// TestFlowLimiterCatchesPlantedDefects: each planted bug in the limiter makes runFlow fail on
// some of 300 seeded runs, none of which fails without it.
func TestFlowLimiterCatchesPlantedDefects(t *testing.T) {
	const seeds = 300
	for seed := range int64(seeds) {
		if err := runFlow(seededDraw{rand.New(rand.NewSource(seed))}, NoDefect); err != nil {
			t.Fatalf("seed %d without a defect: %v", seed, err)
		}
	}
	for _, def := range []struct {
		d    Defect
		name string
	}{
		{DefectKeyLimitPlusOne, "a key runs KeyLimit+1"},
		{DefectKindRateIgnored, "the kind's rate ignored"},
		{DefectBurstAtStart, "buckets start full"},
		{DefectTimeoutUncapped, "the timeout not cut to the visibility limit"},
	} {
		caught := 0
		var first error
		for seed := range int64(seeds) {
			if err := runFlow(seededDraw{rand.New(rand.NewSource(seed))}, def.d); err != nil {
				if caught++; first == nil {
					first = err
				}
			}
		}
		if caught == 0 {
			t.Errorf("%s: not caught in %d runs", def.name, seeds)
			continue
		}
		t.Logf("%s: caught in %d of %d runs, first: %v", def.name, caught, seeds, first)
	}
}

// TestTimedOutAttemptIsJudgedByItsOutcome: an attempt whose timeout ended it is judged by the
// outcome the driver made of it, as any other (the driver names the timeout in a retryable
// failure and leaves a Permanent permanent, as the local runner does); a success stands; an
// attempt cancelled by a lost lease or a stop is abandoned as before.
func TestTimedOutAttemptIsJudgedByItsOutcome(t *testing.T) {
	for _, tc := range []struct {
		name      string
		o         Outcome
		cancelled bool
		want      string
	}{
		{"a retryable failure after the timeout: retried", Outcome{Result: Retryable, Err: "sluice: attempt timed out after 1s"}, false,
			"send retry to queue attempts=1 delay=1m0s waits=0 err=sluice: attempt timed out after 1s"},
		{"a permanent failure after the timeout: dead", Outcome{Result: Permanent, Err: "bad"}, false,
			"send dead to dead-letter attempts=1 delay=0s reason=permanent waits=0 err=bad"},
		{"a success after the timeout stands", Outcome{Result: Success}, false, "done delete ()"},
		{"cancelled as well: abandoned", Outcome{Result: Retryable, Err: "x"}, true, "done release (abandoned: x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := flowHost(t, testConfig(), Flow{Timeout: time.Second})
			if got := render(step(t, m, Deliver{Now: t0, Receipt: "r", Message: message(Encode(job("smtp"), []byte("p")), 1)})); got != "run 1 timeout=1s" {
				t.Fatalf("deliver: %s", got)
			}
			got := render(step(t, m, AttemptDone{Receipt: "r", Now: t0.Add(time.Second), Outcome: tc.o, Cancelled: tc.cancelled, TimedOut: true}))
			if got != tc.want {
				t.Errorf("got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestFlowTravelsAndIsChecked(t *testing.T) {
	a := job("smtp")
	a.Key, a.Timeout, a.Waits = "tenant-7", 3*time.Second, 4
	out := Encode(a, nil)
	if out.Attributes[AttrKey] != "tenant-7" {
		t.Errorf("attributes %v: want the key in %s", out.Attributes, AttrKey)
	}
	got, _, err := Decode(message(out, 1))
	if err != nil || got != a {
		t.Errorf("Decode = %+v, %v; want %+v", got, err, a)
	}
	m := newMachine(t, testConfig())
	for _, f := range []Flow{{KeyLimit: -1}, {Timeout: -1}, {Rate: flow.Rate{Count: 1}}, {KeyRate: flow.Rate{Count: -1, Per: 1}}} {
		if err := m.Step(Register{Kind: "mail", Flow: f}); err == nil {
			t.Errorf("Register with %+v accepted", f)
		}
	}
}

// TestCheckFlowFires: the machine's own flow invariants catch a key over its limit (the
// planted DefectKeyLimitPlusOne) and a running count that drifted from the runs outstanding.
func TestCheckFlowFires(t *testing.T) {
	cfg := testConfig()
	cfg.Defect = DefectKeyLimitPlusOne
	m := flowHost(t, cfg, Flow{KeyLimit: 1})
	for _, r := range []string{"r1", "r2"} {
		if err := m.Step(Deliver{Now: t0, Receipt: r, Message: message(Encode(keyed("a"), []byte("p")), 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "its limit is 1") {
		t.Errorf("a key running 2 with a limit of 1: CheckInvariants = %v", err)
	}
	m = flowHost(t, testConfig(), Flow{KeyLimit: 2})
	step(t, m, Deliver{Now: t0, Receipt: "r1", Message: message(Encode(keyed("a"), []byte("p")), 1)})
	m.keys[keyID{"mail", "a"}].running++
	if err := m.CheckInvariants(); err == nil || !strings.Contains(err.Error(), "counts 2 running, 1 runs outstanding") {
		t.Errorf("a drifted count: CheckInvariants = %v", err)
	}
}
