package sluice

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice/core/runner"
)

// gatherMax bounds the commands and outcomes one commit gathers, so one batch cannot grow
// without limit under a flood of enqueues.
const gatherMax = 4096

// Runner runs jobs of any number of kinds durably, from one journal in its directory, with
// one group commit and one pool of Config.Capacity units (docs/runner.md). Each kind is
// registered with Register before Run and has its own codec, handler and optional concurrency
// limit; its *Kind handle enqueues and reads typed jobs. All methods are safe for concurrent
// use. Enqueue, Cancel and Retry work from New to Close; attempts start only while Run or
// Drain is active.
type Runner struct {
	cfg   Config
	chain CallHandler // Config.Middleware around the handlers; nil without middleware
	log   *slog.Logger
	clk   clock.Clock

	cmds chan command
	done *outbox
	quit chan struct{} // closed by Close: the owner stops
	exit chan struct{} // closed by the owner when it has stopped

	closeOnce sync.Once
	closeErr  error

	syncs *counter
	// last is Stats at close (written by the owner before it closes exit).
	last Stats

	mu      sync.Mutex
	active  bool  // Run or Drain in progress
	started bool  // Run or Drain was called once: Register is closed
	failure error // set once, before failC is closed
	failC   chan struct{}
}

type cmdKind uint8

const (
	cmdEnqueue cmdKind = iota + 1
	cmdEnqueueMany
	cmdCancel
	cmdRetry
	cmdGet
	cmdList
	cmdStats
	cmdRegister
	cmdSchedule    // set a schedule (schedule.go)
	cmdUnschedule  // remove one
	cmdSchedules   // list them
	cmdDispatch    // on: admission on, or off to begin a graceful stop
	cmdWaitIdle    // reply.wait closes once the engine is idle and nothing runs
	cmdWaitStopped // reply.wait closes once the engine says a stop is done
	cmdWaitDue     // reply.wait closes once nothing due at or before command.due waits or runs
	cmdBreakers
	cmdPause  // pause the kind named by command.target
	cmdResume // resume it
	cmdPaused // list the paused kinds
)

type command struct {
	kind    cmdKind
	due     time.Time
	target  string
	payload []byte
	opts    runner.Opts
	jobs    []runner.NewJob    // cmdEnqueueMany
	filter  ListFilter         // cmdList
	reg     kindEntry          // cmdRegister
	sched   runner.NewSchedule // cmdSchedule, cmdUnschedule (the name)
	id      uint64
	on      bool
	reply   chan reply
}

type reply struct {
	id    uint64
	ids   []uint64 // cmdEnqueueMany
	dup   bool     // cmdEnqueue: a duplicate of a job holding its unique key
	dups  []bool   // cmdEnqueueMany: dup, per job
	page  Page[[]byte]
	err   error
	job   JobInfo[[]byte]
	found bool
	stats Stats
	wait  <-chan struct{}

	paused   []string          // cmdPaused
	breakers []BreakerInfo     // cmdBreakers
	scheds   []runner.Schedule // cmdSchedules
}

type doneMsg struct {
	tok runner.Token
	err error // the handler's, through the middleware
}

// outbox carries the attempts' outcomes to the owner. Attempt goroutines append; the append
// that finds it empty wakes the owner, which takes everything waiting at once: a batch of
// outcomes costs the owner one wake-up, not one per attempt. It holds at most one outcome
// per attempt goroutine (each reports one, then waits for its next attempt).
type outbox struct {
	mu    sync.Mutex
	msgs  []doneMsg
	ready chan struct{} // capacity 1: outcomes are waiting (or were, and were taken)
}

func newOutbox() *outbox { return &outbox{ready: make(chan struct{}, 1)} }

// put adds d; it never blocks.
func (b *outbox) put(d doneMsg) {
	b.mu.Lock()
	b.msgs = append(b.msgs, d)
	first := len(b.msgs) == 1
	b.mu.Unlock()
	if first {
		select {
		case b.ready <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// take returns up to limit of the outcomes waiting (all when limit is 0), in arrival order, and
// keeps spare (emptied) for the next ones, so that two slices serve in turn. Outcomes left
// behind wake the owner again.
func (b *outbox) take(spare []doneMsg, limit int) []doneMsg {
	b.mu.Lock()
	defer b.mu.Unlock()
	msgs := b.msgs
	b.msgs = spare[:0]
	if limit > 0 && len(msgs) > limit {
		b.msgs = append(b.msgs, msgs[limit:]...)
		msgs = msgs[:limit]
		select {
		case b.ready <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
	return msgs
}

// New opens (or creates) the runner journal in dir, replaying it, and starts the owner
// goroutine. Jobs that were running when the last process crashed are recorded as failed
// (interrupted, retryable) attempts; after a graceful stop there are none (see Run). Register
// the kinds next, then Run. A journal of an earlier sluice is refused (ErrFormat) and left as
// it is; the error names the file and what to do.
func New(dir string, cfg Config) (*Runner, error) {
	cfg, ecfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ecfg.KindsOnly = true
	syncs := &counter{}
	op, err := openEngine(dir, cfg, ecfg, syncs)
	if err != nil {
		return nil, err
	}
	return newRunner(op, cfg, syncs), nil
}

// Open is New and Register of one kind named DefaultKind, for a program with one kind of
// job: the handle it returns carries the Runner's methods too (Run, Drain, Cancel, Close...).
func Open[A any](dir string, cfg Config, codec Codec[A], handler Handler[A]) (*Kind[A], error) {
	if codec == nil || handler == nil {
		return nil, errors.New("sluice: Open: the codec and the handler must not be nil")
	}
	r, err := New(dir, cfg)
	if err != nil {
		return nil, err
	}
	k, err := Register(r, DefaultKind, codec, handler)
	if err != nil {
		_ = r.Close()
		return nil, err
	}
	return k, nil
}

func newRunner(op opened, cfg Config, syncs *counter) *Runner {
	r := &Runner{
		cfg:   cfg,
		chain: chain(cfg.Middleware, innerCall),
		log:   cfg.Logger,
		clk:   cfg.Clock,
		cmds:  make(chan command, gatherMax),
		done:  newOutbox(),
		quit:  make(chan struct{}),
		exit:  make(chan struct{}),
		syncs: syncs,
		failC: make(chan struct{}),
	}
	node := runner.NewNode(op.eng, runner.NodeConfig{GatherMax: gatherMax, SyncEach: cfg.opts.SyncEveryRecord, Observe: cfg.opts.Observe})
	o := &owner{r: r, node: node, eng: op.eng, closeFS: op.close, quit: r.quit, kinds: map[string]kindEntry{},
		running: map[runner.Token]context.CancelCauseFunc{}, calls: map[runner.Ref]command{}, waits: map[runner.Ref]chan struct{}{}}
	go o.loop()
	return r
}

// enqueue encodes nothing and applies no option: the kind's handle did (Kind.jobOpts). It
// submits one job.
func (r *Runner) enqueue(ctx context.Context, s jobSettings, due time.Time, target string, payload []byte) (uint64, error) {
	rep, err := r.call(ctx, command{kind: cmdEnqueue, due: due, target: target, payload: payload, opts: s.o})
	if err != nil {
		return 0, err
	}
	if rep.err != nil {
		return rep.id, rep.err
	}
	if failed := s.duplicate(rep.id, rep.dup); failed != "" {
		return rep.id, fmt.Errorf("%w: %s", ErrDuplicate, failed)
	}
	return rep.id, nil
}

// duplicate honours WasDuplicate and FailOnDuplicate for a job answered with id, dup: it
// sets the caller's flag and, under FailOnDuplicate, returns what to report ("" otherwise).
func (s jobSettings) duplicate(id uint64, dup bool) string {
	if s.dupOut != nil {
		*s.dupOut = dup
	}
	if !dup || !s.dupFail {
		return ""
	}
	return fmt.Sprintf("job %d holds unique key %q", id, s.o.Unique)
}

// dupReportMax bounds how many duplicates an EnqueueMany error names.
const dupReportMax = 5

// enqueueMany submits jobs whose payloads the kind's handle encoded; sets[i] are job i's
// options, whose WasDuplicate and FailOnDuplicate it honours as enqueue does for one job.
// The other jobs of the batch are enqueued either way.
func (r *Runner) enqueueMany(ctx context.Context, njs []runner.NewJob, sets []jobSettings) ([]uint64, error) {
	rep, err := r.call(ctx, command{kind: cmdEnqueueMany, jobs: njs})
	if err != nil {
		return nil, err
	}
	if rep.err != nil {
		return rep.ids, rep.err
	}
	var failed []string
	n := 0
	for i, s := range sets {
		if f := s.duplicate(rep.ids[i], i < len(rep.dups) && rep.dups[i]); f != "" {
			if n++; n <= dupReportMax {
				failed = append(failed, fmt.Sprintf("job %d of %d: %s", i, len(sets), f))
			}
		}
	}
	if n == 0 {
		return rep.ids, nil
	}
	if n > dupReportMax {
		failed = append(failed, fmt.Sprintf("and %d more", n-dupReportMax))
	}
	return rep.ids, fmt.Errorf("%w: %s (the batch's other jobs were enqueued; the ids returned include the holders')",
		ErrDuplicate, strings.Join(failed, "; "))
}

// Get returns a copy of the job with the given id, of any kind, its payload as journaled
// (Kind.Get decodes it), or ErrNotFound. It waits for the runner's owner, so ctx bounds it.
func (r *Runner) Get(ctx context.Context, id uint64) (JobInfo[[]byte], error) {
	rep, err := r.call(ctx, command{kind: cmdGet, id: id})
	if err != nil {
		return JobInfo[[]byte]{}, err
	}
	if rep.err != nil {
		return JobInfo[[]byte]{}, rep.err
	}
	if !rep.found {
		return JobInfo[[]byte]{}, errorf(ErrNotFound, "get %d: job not found (never issued, or compacted after it ended)", id)
	}
	return rep.job, nil
}

// List returns a page of the jobs of any kind that match f (ListFilter.Kind selects one),
// payloads as journaled; Kind.List is the typed form. Pages are ascending by id, each job as
// of a commit (the page is read in chunks, between which the runner commits other work).
// Resume with f.After = page.Next while page.More. A page holds at most f.Limit jobs (default
// 100, at most 1,000) and looks at no more than ListScanMax ids, so a filter that matches
// rarely returns short pages, with More set.
func (r *Runner) List(ctx context.Context, f ListFilter) (Page[[]byte], error) {
	return r.list(ctx, f)
}

// Cancel cancels a job that is not terminal, durably. A running attempt's context is cancelled
// and its outcome ignored.
func (r *Runner) Cancel(ctx context.Context, id uint64) error {
	rep, err := r.call(ctx, command{kind: cmdCancel, id: id})
	if err != nil {
		return err
	}
	return rep.err
}

// Pause stops the kind named kind from starting attempts, durably: it stays paused across
// restarts until Resume. Attempts running go on; Enqueue goes on. Pausing a paused kind does
// nothing. ErrUnknownKind when no job names the kind and it is not registered.
func (r *Runner) Pause(ctx context.Context, kind string) error {
	rep, err := r.call(ctx, command{kind: cmdPause, target: kind})
	if err != nil {
		return err
	}
	return rep.err
}

// Resume lets a paused kind start attempts again, durably (nothing for a kind not paused).
func (r *Runner) Resume(ctx context.Context, kind string) error {
	rep, err := r.call(ctx, command{kind: cmdResume, target: kind})
	if err != nil {
		return err
	}
	return rep.err
}

// Retry re-enqueues a dead job, due now, durably.
func (r *Runner) Retry(ctx context.Context, id uint64) error {
	rep, err := r.call(ctx, command{kind: cmdRetry, id: id})
	if err != nil {
		return err
	}
	return rep.err
}

// Stats returns counts by state and the disk work done since Open. It waits for the runner's
// owner, so ctx bounds it (ctx.Err() when ctx ends first). After Close it returns the values
// at close, without an error, so a final metrics scrape still reads them.
func (r *Runner) Stats(ctx context.Context) (Stats, error) {
	rep, err := r.call(ctx, command{kind: cmdStats})
	if err == nil && rep.err == nil {
		return rep.stats, nil
	}
	if r.zero() {
		return Stats{}, err
	}
	select { // only a closed runner fails a read; its values at close are final
	case <-r.exit:
		return r.last, nil
	case <-ctx.Done():
		return Stats{}, ctx.Err()
	}
}

// Run starts attempts until ctx ends; then it stops gracefully and closes the runner: it
// starts nothing more, waits up to Config.Grace for running attempts, then cancels the
// contexts of those still running (context.Cause is ErrShutdown) and waits up to Grace again.
// An attempt the stop cancelled that does not succeed is released: journaled as such, its job
// waits again at its due time, the attempt is not counted and the breaker records nothing
// (with Policy.Attempts 1, a deploy never spends the job). A handler still running after the
// second grace is abandoned: its outcome is ignored and the next Open counts the attempt as
// interrupted, as after a crash. Run returns nil after a clean shutdown, or the error that
// stopped the runner (a poisoned journal).
func (r *Runner) Run(ctx context.Context) error {
	if err := r.begin(); err != nil {
		return err
	}
	defer r.end()
	fail := r.failed()
	select {
	case <-ctx.Done():
	case <-fail:
	case <-r.exit:
		return ErrClosed
	}
	r.stopDispatch()
	cerr := r.Close()
	if err := r.failureErr(); err != nil {
		return err
	}
	return cerr
}

// Drain starts attempts until nothing is due, waiting, deferred or running, then returns nil
// (the runner stays open). If ctx ends first, it stops as Run does (grace, cancel, release)
// without closing, and returns ctx.Err().
func (r *Runner) Drain(ctx context.Context) error {
	return r.drain(ctx, command{kind: cmdWaitIdle})
}

// DrainDue is Drain for tests: it starts attempts until nothing that was due when it was
// called (by Config.Clock) is waiting or running, then returns nil. It does not wait for jobs
// due later, retries whose backoff ends later, or jobs a breaker deferred past that time.
func (r *Runner) DrainDue(ctx context.Context) error {
	if r.zero() {
		return errZeroRunner
	}
	return r.drain(ctx, command{kind: cmdWaitDue, due: r.clk.Now()})
}

func (r *Runner) drain(ctx context.Context, wait command) error {
	if err := r.begin(); err != nil {
		return err
	}
	defer r.end()
	rep, err := r.call(ctx, wait)
	if err != nil {
		r.stopDispatch()
		return err
	}
	select {
	case <-rep.wait:
		r.stopDispatch()
		return r.failureErr()
	case <-r.failed():
		r.stopDispatch()
		return r.failureErr()
	case <-r.exit:
		return ErrClosed
	case <-ctx.Done():
		r.stopDispatch()
		return ctx.Err()
	}
}

// Close stops the runner as Run does when its context ends (no attempt starts; running ones
// get the grace, then are cancelled and released or abandoned), flushes, compacts if
// Config.CompactOnClose, and closes the journal, which Close waits for. It returns the
// journal's close error, if any; later calls return nil.
func (r *Runner) Close() error {
	if r.zero() {
		return errZeroRunner
	}
	first := false
	r.closeOnce.Do(func() {
		first = true
		close(r.quit)
		<-r.exit
	})
	if !first {
		<-r.exit
		return nil
	}
	return r.closeErr
}

func (r *Runner) begin() error {
	if r.zero() {
		return errZeroRunner
	}
	r.mu.Lock()
	if r.active {
		r.mu.Unlock()
		return ErrRunning
	}
	r.active, r.started = true, true
	r.mu.Unlock()
	if _, err := r.call(context.Background(), command{kind: cmdDispatch, on: true}); err != nil {
		r.end()
		return err
	}
	return nil
}

func (r *Runner) end() {
	r.mu.Lock()
	r.active = false
	r.mu.Unlock()
}

// stopDispatch turns admission off, which begins the engine's graceful stop, and waits until
// the engine says it is done (its grace timers run on the owner's clock).
func (r *Runner) stopDispatch() {
	ctx := context.Background()
	if _, err := r.call(ctx, command{kind: cmdDispatch, on: false}); err != nil {
		return
	}
	rep, err := r.call(ctx, command{kind: cmdWaitStopped})
	if err != nil {
		return
	}
	select {
	case <-rep.wait:
	case <-r.exit:
	}
}

// zero reports a nil or zero Runner (not made by New or Open): its methods refuse at once
// rather than block on nil channels.
func (r *Runner) zero() bool { return r == nil || r.cmds == nil }

var errZeroRunner = notMade("Runner", "New or Open")

// failed returns a channel closed once the runner has failed (a poisoned journal).
func (r *Runner) failed() <-chan struct{} { return r.failC }

// failureErr returns the error that failed the runner, or nil.
func (r *Runner) failureErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure
}

// fail records the first error that stops the runner (called by the owner).
func (r *Runner) fail(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failure == nil {
		r.failure = err
		close(r.failC)
	}
}

// call sends a command to the owner and waits for its reply.
func (r *Runner) call(ctx context.Context, c command) (reply, error) {
	if r.zero() {
		return reply{}, errZeroRunner
	}
	c.reply = make(chan reply, 1)
	select {
	case r.cmds <- c:
	case <-r.exit:
		return reply{}, ErrClosed
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
	select {
	case rep := <-c.reply:
		return rep, nil
	case <-r.exit:
		// The owner may have answered just before it stopped.
		select {
		case rep := <-c.reply:
			return rep, nil
		default:
			return reply{}, ErrClosed
		}
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// ErrTooLarge is returned by Enqueue for a payload whose record would exceed Config.RecordMax.
var ErrTooLarge = errors.New("sluice: payload too large")
