package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicehq/sluice/sim/internal/flowcheck"
	"github.com/sluicehq/sluice/sim/internal/runview"
)

// Invariant names. Each is checked against the facts the world reports to a Checker, after
// every step; a violation prints the name.
const (
	InvNoLostAck         = "no-lost-ack"
	InvReplayEqualsLive  = "replay-equals-live"
	InvNoPhantom         = "no-phantom"
	InvSingleRun         = "single-run"
	InvCapacity          = "capacity"
	InvAttemptsMax       = "attempts-max"
	InvNoStartAfterLate  = "no-start-after-deadline"
	InvBreakerRespected  = "breaker-respected"
	InvBackoff           = "backoff-respected"
	InvNoStartBeforeDue  = "no-start-before-due"
	InvNoRestartTerminal = "no-restart-terminal"
	InvCorruptionRefused = "corruption-refused"
	InvRecoveryOpens     = "open-recovers"
	InvJournalDurable    = "journal-entry-durable"
	InvRecordLimit       = "record-limit"
	InvMachine           = "machine-invariants"
	InvStopSpendsNothing = "stop-spends-nothing"
	InvUniqueRespected   = "unique-respected"
	InvKindLimit         = "kind-limit"
	InvPeriodOnce        = "period-once"
	InvLeaseNoRenewAfter = "lease-no-renew-after-disposition"
	InvLeaseNoCallAfter  = "lease-no-call-after-drop"
	InvLeaseRequestExact = "lease-request-exact"
	InvLeaseNoOverlap    = "lease-no-overlap"
	InvCallWithinLease   = "lease-call-within-lease"
	InvStopMargin        = "stop-margin"
	InvHiddenWhileWork   = "hidden-while-working"
	InvNoConcurrent      = "no-concurrent-consumers"
	InvSingleDisposition = "single-disposition"
	InvConfigRefused     = "config-refused"
	InvLiveness          = "liveness"
)

// Invariants lists every invariant name in report order, with what it promises.
var Invariants = []struct{ Name, Promise string }{
	{InvNoLostAck, "after every restart the recovered state holds every acknowledged job that was not terminal"},
	{InvReplayEqualsLive, "the state recovered from disk equals the live state at the last acknowledged transition (or a later written one)"},
	{InvNoPhantom, "nothing that was never appended appears after recovery"},
	{InvSingleRun, "a job runs at most once at a time"},
	{InvCapacity, "at most Capacity attempts run at once on a node"},
	{InvAttemptsMax, "no job starts more than Attempts attempts"},
	{InvNoStartAfterLate, "no attempt starts at or after first due + Deadline"},
	{InvBreakerRespected, "no attempt starts while its target's breaker is open, except a half-open probe"},
	{InvBackoff, "a retryable failure at t waits wait(n) in [delay(n)/2, delay(n)] (or the server's wait capped at Cap): due = t + wait"},
	{InvNoStartBeforeDue, "no attempt starts before its job's due time"},
	{InvNoRestartTerminal, "no cancelled or terminal job starts again"},
	{InvCorruptionRefused, "open refuses a journal whose synced data was corrupted, with an error naming it"},
	{InvRecoveryOpens, "open recovers every journal a crash (without media corruption) can leave behind"},
	{InvJournalDurable, "after an open and after a compaction that returned success, the journal's directory entry is durable: a crash then leaves the file the engine appends to under its name"},
	{InvRecordLimit, "an enqueue whose record would exceed RecordMax is refused (ErrTooLarge) before anything is written"},
	{InvMachine, "every machine's own checkInvariants holds after every step"},
	{InvStopSpendsNothing, "an attempt a graceful stop cut (and that did not succeed) is given back: the job waits again at its due with the attempt uncounted, and its breaker records nothing"},
	{InvUniqueRespected, "no durable state (committed or recovered after a crash) holds two non-terminal jobs with the same unique key, and no job takes a key inside the window a durable success keeps it for"},
	{InvKindLimit, "no kind has more attempts running at once on a node than its concurrency limit"},
	{InvPeriodOnce, "each period of each schedule is handled once across crashes, compaction and restarts (at most one job), in order, none skipped except missed ones as its catch-up policy says; recovery gives back the schedules as last committed"},
	{InvLeaseNoRenewAfter, "no renewal is sent after the receipt's disposition began"},
	{InvLeaseNoCallAfter, "no call names a receipt after it was dropped"},
	{InvLeaseRequestExact, "every renewal asks for request(now) = min(W, floor(t0+C-now)) and none is sent under 1 s"},
	{InvLeaseNoOverlap, "a disposition is never sent while a renewal of the same receipt is in flight"},
	{InvCallWithinLease, "no call about a receipt reaches the queue after the receipt's stop point (local deadline minus the stop margin) as of when it was sent"},
	{InvStopMargin, "a handler cancelled because its lease is ending is cancelled while the queue still hides its message for the stop margin (given the latency bound)"},
	{InvHiddenWhileWork, "a handler never runs while its message is visible at the queue (given the latency bound)"},
	{InvNoConcurrent, "no message is processed by two consumers at once while one holds its lease"},
	{InvSingleDisposition, "each delivery gets at most one disposition (a retry follows only a retryable failure of the last)"},
	{InvConfigRefused, "an open or start with a field of its configuration out of range is refused before it does anything, with an error naming that field"},
	{InvReadsMatch, "what Get and List return of a job (state, attempt count, last error, the history of its last ten attempts) agrees with the checker's record of its starts, outcomes, retries and cancels"},
	{InvStartWhenFree, "after a commit, while the node dispatches with a unit free, no job is left waiting that was due, not deferred, and not held by its kind's limit: the commit started it"},
	{InvWorkConserving, "while a node dispatches with a unit free, a due job whose breaker admits it starts within one commit cycle"},
	{InvRetryOnTime, "a retried job starts by its computed due (its failure + the policy's longest wait) plus one commit cycle, when a unit is free"},
	{InvDeferredOnTime, "a deferred job starts by its breaker's reopening plus one commit cycle, when a unit is free and the breaker admits it"},
	{InvHandlerPrompt, "a received delivery's handler starts in the step that made a concurrency slot free"},
	{InvDispositionPrompt, "a handler's result is sent as a disposition call in the step it arrives, or in the one that ends the renewal it waited behind"},
	{InvRenewalOnTime, "each renewal is sent at its renewal time (a third of the lease left, or the pacing delay after a failure), early only by the coalescing window, late only by the scheduling slack"},
	{InvDropAtMargin, "a receipt is dropped at its margin (or its stop point with a renewal unanswered), late only by the scheduling slack"},
	{InvAckPrompt, "a command a runner node took is acknowledged within one commit cycle, unless the node crashed first"},
	{InvWakeAtNotLate, "every machine's WakeAt, and the driver's timer, is never later than the earliest pending action recomputed from the state"},
	{InvLiveness, "with faults off, every non-cancelled job ends and every message is deleted or dead-lettered within the bound"},
}

var invIndex = func() map[string]int {
	m := make(map[string]int, len(Invariants))
	for i, inv := range Invariants {
		m[inv.Name] = i
	}
	return m
}()

// The indexes of the invariants checked for every receipt after every step, looked up once.
var (
	idxHiddenWhileWork   = invIndex[InvHiddenWhileWork]
	idxDispositionPrompt = invIndex[InvDispositionPrompt]
	idxRenewalOnTime     = invIndex[InvRenewalOnTime]
	idxDropAtMargin      = invIndex[InvDropAtMargin]
)

// workingRef is a receipt whose handler runs and its model, c.receipts[r] (held here: the
// checks after every step visit each one).
type workingRef struct {
	r string
	m *receiptModel
}

// Violation is a broken invariant.
type Violation struct {
	Invariant string
	At        time.Duration
	Detail    string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("%s at %s: %s", v.Invariant, Offset(v.At), v.Detail)
}

// Checker holds the model the invariants are checked against. The world reports facts to it
// as they happen (an enqueue acknowledged, an attempt started, a renewal sent); each fact is
// checked at once against every invariant it concerns. The first violation is kept.
type Checker struct {
	now    time.Duration
	specs  runview.SpecCache // PeriodFired's parsed cron specs
	holder map[string]uint64 // checkUnique's, emptied on each call (it runs after every commit)
	v      *Violation
	checks []int // per invariant, in Invariants order

	nodes  map[int]*nodeModel
	jobs   map[jobKey]*jobModel
	scheds map[int]*schedNode // periodic jobs, by node (check_schedule.go)
	flow   *flowcheck.Model   // flow control's model (nil: off; sim/internal/flowcheck)

	lease    LeaseParams
	receipts map[string]*receiptModel
	received int          // Received calls: a change of receipts invalidates openSeen
	working  []workingRef // receipts whose handler runs, in start order
	// openSeen is each worker's open receipts at its last CheckWorker with their models (nil:
	// none filed), valid while received is openAt[worker]: workers' open lists change little
	// between the steps after which they are checked.
	openSeen [][]workingRef // by worker id
	openAt   []int

	hiddenSlack time.Duration // the scheduling families' slack (SetHiddenSlack)
	overlaps    []overlap

	syncDelay  time.Duration // the drawn sync delay (SetSyncDelay)
	liveFrom   time.Duration // the liveness phase's start (BeginLiveness)
	restartMax time.Duration
	muted      []bool // tests only: invariants turned off (mute)
}

// NewChecker returns an empty model.
func NewChecker() *Checker {
	invTable.once.Do(buildInvTable) // here, not at init: the fleet's invariants join at init
	return &Checker{
		checks:   make([]int, len(Invariants)),
		nodes:    make(map[int]*nodeModel),
		jobs:     make(map[jobKey]*jobModel),
		receipts: make(map[string]*receiptModel),
		specs:    runview.SpecCache{},
	}
}

// SetTime sets the time facts are stamped with.
func (c *Checker) SetTime(now time.Duration) { c.now = now }

// Violation returns the first violation, or nil.
func (c *Checker) Violation() *Violation { return c.v }

// Checks returns how many times each invariant was checked, in Invariants order.
func (c *Checker) Checks() []int { return append([]int(nil), c.checks...) }

// ChecksTotal is the sum of Checks.
func (c *Checker) ChecksTotal() int {
	n := 0
	for _, k := range c.checks {
		n += k
	}
	return n
}

// invTable finds an invariant's index without hashing its whole name (the checks run after
// every step, and a map lookup per check was 4% of a sweep): a table indexed by a few of the
// name's bytes, mixed with a multiplier chosen by the first NewChecker so that no two names
// share a slot.
// The names are constants, so a hit compares a string with itself.
var invTable struct {
	once  sync.Once
	mult  int
	slots [256]struct {
		name string
		i    int
	}
}

func invSlot(name string, mult int) int {
	n := len(name)
	h := (n*mult+int(name[0]))*mult + int(name[n/2])
	h = (h*mult+int(name[n-1]))*mult + int(name[(n-1)/3])
	return (h*mult + int(name[2*(n-1)/3])) & 255
}

func buildInvTable() {
	for mult := 3; mult < 1<<16; mult += 2 {
		var used [256]bool
		ok := true
		for _, inv := range Invariants {
			k := invSlot(inv.Name, mult)
			if used[k] {
				ok = false
				break
			}
			used[k] = true
		}
		if ok {
			invTable.mult = mult
			for i, inv := range Invariants {
				e := &invTable.slots[invSlot(inv.Name, mult)]
				e.name, e.i = inv.Name, i
			}
			return
		}
	}
	// No multiplier separates them: every lookup goes to invIndex.
}

// inv returns name's index in Invariants (0 for an unknown name, as invIndex does).
func (c *Checker) inv(name string) int {
	if len(name) > 0 && invTable.mult != 0 {
		if e := &invTable.slots[invSlot(name, invTable.mult)]; e.name == name {
			return e.i
		}
	}
	return invIndex[name]
}

// check counts one check of name and records a violation when ok is false. It returns ok.
func (c *Checker) check(name string, ok bool, format string, args ...any) bool {
	i := c.inv(name)
	c.checks[i]++
	if !ok && c.v == nil && (c.muted == nil || !c.muted[i]) {
		c.v = &Violation{Invariant: name, At: c.now, Detail: fmt.Sprintf(format, args...)}
	}
	return ok
}

// holds counts one check of name that held, when ok; a caller that gets false reports the
// violation with check(name, false, ...). The checks run after every step: this way a passing
// check builds no arguments for its failure's message (boxing them allocated on every call).
func (c *Checker) holds(name string, ok bool) bool {
	if ok {
		c.checks[c.inv(name)]++
	}
	return ok
}

// Fail records a violation found outside the checker's model (a machine's own invariants, an
// open that should have refused).
func (c *Checker) Fail(name, format string, args ...any) {
	if _, ok := invIndex[name]; !ok {
		panic("sim: unknown invariant " + name)
	}
	c.check(name, false, format, args...)
}

// Pass counts a successful check made outside the model.
func (c *Checker) Pass(name string) { c.check(name, true, "") }

// Liveness records the end-of-run liveness check: detail names what did not finish in time.
func (c *Checker) Liveness(ok bool, detail string) { c.check(InvLiveness, ok, "%s", detail) }
