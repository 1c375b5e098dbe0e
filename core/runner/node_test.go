package runner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/sim/disk"
)

// nodeHarness drives a Node as every driver does (Ready, perform, Advance), keeping the sync
// of a written batch until the test lands it, and renders what it performed, one line each.
type nodeHarness struct {
	t    *testing.T
	d    *disk.Disk
	n    *Node
	sync Batch // written, not yet synced
	log  []string
	ref  Ref
}

func newNodeHarness(t *testing.T, cfg Config, ncfg NodeConfig) *nodeHarness {
	t.Helper()
	d := disk.New(1)
	if cfg.Capacity == 0 {
		cfg.Capacity = 2
	}
	if cfg.Grace == 0 {
		cfg.Grace = time.Second
	}
	e, err := Open(d, journalName, cfg, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return &nodeHarness{t: t, d: d, n: NewNode(e, ncfg)}
}

func (h *nodeHarness) step(in Input) {
	h.t.Helper()
	h.n.Step(in)
	h.check()
}

func (h *nodeHarness) check() {
	h.t.Helper()
	if err := h.n.CheckInvariants(); err != nil {
		h.t.Fatal(err)
	}
}

// enqueue proposes a job due at due (zero: now) and returns its ref.
func (h *nodeHarness) enqueue(due time.Time, payload string) Ref {
	h.t.Helper()
	h.ref++
	h.step(Propose{Ref: h.ref, Cmd: Enqueue{Due: due, Target: "t", Payload: []byte(payload)}})
	return h.ref
}

// pump performs every Ready, as a driver does after each input.
func (h *nodeHarness) pump() {
	h.t.Helper()
	for h.n.HasReady() {
		rd := h.n.Ready()
		h.perform(rd)
		h.n.Advance()
		h.check()
	}
}

func (h *nodeHarness) perform(rd Effects) {
	h.t.Helper()
	if !rd.Sync.Empty() {
		if !h.sync.Empty() {
			h.t.Fatal("a second batch written while one flies")
		}
		h.sync = rd.Sync
		h.log = append(h.log, "write")
	}
	if rd.Landed != nil && rd.Landed.Records > 0 {
		h.log = append(h.log, fmt.Sprintf("landed %d", rd.Landed.Records))
	}
	for _, a := range rd.Acks {
		if a.Err != nil {
			h.log = append(h.log, fmt.Sprintf("ack %d: %v", a.Ref, errName(a.Err)))
		} else {
			h.log = append(h.log, fmt.Sprintf("ack %d id %d", a.Ref, a.ID))
		}
	}
	for _, c := range rd.Cancels {
		h.log = append(h.log, "cancel "+c.Token.String()+" "+c.Why.String())
	}
	for _, s := range rd.Starts {
		h.log = append(h.log, "start "+s.Token.String())
	}
	for _, r := range rd.Reads {
		h.log = append(h.log, fmt.Sprintf("read %d", r))
	}
	for _, w := range rd.Wakes {
		h.log = append(h.log, fmt.Sprintf("wake %d", w))
	}
	if rd.Failed != nil {
		h.log = append(h.log, "failed")
	}
	if rd.Compact {
		h.log = append(h.log, "compact")
		if err := h.n.Compact(); err != nil {
			h.t.Fatal(err)
		}
	}
	if rd.Close {
		h.log = append(h.log, "close")
		if err := h.n.Close(); err != nil {
			h.t.Fatal(err)
		}
	}
}

func errName(err error) string {
	switch {
	case errors.Is(err, ErrPoisoned):
		return "poisoned"
	case errors.Is(err, ErrClosed):
		return "closed"
	}
	return err.Error()
}

// land syncs the batch in flight (err: the sync's result instead) and steps SyncDone.
func (h *nodeHarness) land(err error) {
	h.t.Helper()
	if h.sync.Empty() {
		h.t.Fatal("nothing in flight to land")
	}
	b := h.sync
	h.sync = Batch{}
	if serr := b.Sync(); err == nil {
		err = serr
	}
	h.step(SyncDone{Err: err})
}

// settle lands batches until none flies.
func (h *nodeHarness) settle() {
	h.t.Helper()
	h.pump()
	for !h.sync.Empty() {
		h.land(nil)
		h.pump()
	}
}

func (h *nodeHarness) take() []string {
	l := h.log
	h.log = nil
	return l
}

// TestNodeWritesNothingWhileASyncFlies: commands stepped while a batch flies touch no disk,
// are acknowledged by the next batch, not the one in flight, and only after its SyncDone.
func TestNodeWritesNothingWhileASyncFlies(t *testing.T) {
	h := newNodeHarness(t, Config{}, NodeConfig{})
	far := epoch.Add(time.Hour)
	a := h.enqueue(far, "a")
	h.pump()
	if diff := cmp.Diff([]string{"write"}, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	ops := h.d.Ops()
	b := h.enqueue(far, "b")
	c := h.enqueue(far, "c")
	h.pump()
	if got := h.d.Ops(); got != ops {
		t.Fatalf("%d disk operations while a sync flew", got-ops)
	}
	if l := h.take(); len(l) != 0 {
		t.Fatalf("effects while a sync flew: %v", l)
	}
	h.land(nil)
	h.pump()
	want := []string{"landed 1", fmt.Sprintf("ack %d id 1", a), "write"}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	h.land(nil)
	h.pump()
	want = []string{"landed 2", fmt.Sprintf("ack %d id 2", b), fmt.Sprintf("ack %d id 3", c)}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// TestNodeWakeReachedWritesAtOnce: the Clock that reaches Effects.WakeAt leaves the Node
// dirty, so its next Ready writes the batch that starts the due job; a wake time at or
// before the Node's now with nothing to write breaks CheckInvariants.
func TestNodeWakeReachedWritesAtOnce(t *testing.T) {
	h := newNodeHarness(t, Config{}, NodeConfig{})
	h.step(Admit{On: true})
	due := epoch.Add(time.Second)
	h.enqueue(due, "a")
	h.settle()
	h.take()
	if w := h.n.WakeAt(); !w.Equal(due) {
		t.Fatalf("WakeAt %v, want the job's due %v", w, due)
	}
	h.step(Clock{Now: due})
	h.settle()
	if diff := cmp.Diff([]string{"write", "landed 1", "start 1#1"}, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// TestNodeAnswersReadsOnlyWhenQuiet: a read stepped after a command that a flight staged is
// not answered at that landing (the command is not durable): the next flight takes nothing
// new (Room 0), and the read is answered at its landing, in a Ready that writes nothing.
func TestNodeAnswersReadsOnlyWhenQuiet(t *testing.T) {
	h := newNodeHarness(t, Config{}, NodeConfig{})
	far := epoch.Add(time.Hour)
	h.enqueue(far, "a")
	h.pump() // write a
	b := h.enqueue(far, "b")
	h.ref++
	read := h.ref
	h.step(Read{Ref: read})
	if h.n.Room() != 0 {
		t.Fatalf("Room %d while a read waits for the flight to land", h.n.Room())
	}
	h.pump()
	h.land(nil)
	h.pump()
	got := h.take()
	for _, l := range got {
		if strings.HasPrefix(l, "read") {
			t.Fatalf("a read answered at a landing that was not quiet: %v", got)
		}
	}
	h.land(nil)
	h.pump()
	want := []string{"landed 1", fmt.Sprintf("ack %d id 2", b), fmt.Sprintf("read %d", read)}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if !h.n.Status().Quiet {
		t.Fatal("not quiet after answering a read")
	}
}

// TestNodeFailedSyncAcknowledgesNothingAfter: a failed sync fails the batch's commands and
// those staged during its flight, starts nothing, and every later command gets the failure.
func TestNodeFailedSyncAcknowledgesNothingAfter(t *testing.T) {
	h := newNodeHarness(t, Config{}, NodeConfig{})
	h.step(Admit{On: true})
	a := h.enqueue(time.Time{}, "a") // due now: admitted in the same batch
	h.pump()
	h.take()
	b := h.enqueue(time.Time{}, "b")
	h.pump()
	h.land(errors.New("injected fsync failure"))
	h.pump()
	want := []string{fmt.Sprintf("ack %d: poisoned", a), fmt.Sprintf("ack %d: poisoned", b), "failed"}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	c := h.enqueue(time.Time{}, "c")
	h.step(Clock{Now: epoch.Add(time.Minute)})
	h.pump()
	want = []string{fmt.Sprintf("ack %d: poisoned", c)}
	if diff := cmp.Diff(want, h.take()); diff != "" {
		t.Fatalf("after the failure (-want +got)\n%s", diff)
	}
	if !h.sync.Empty() {
		t.Fatal("a batch written after the failure")
	}
}

// TestNodeStopSequence: Close turns admission off; at the grace the running attempt is
// cancelled, at the second grace abandoned; then the flush, the compaction, and Close, in that
// order, and nothing starts after Close was stepped.
func TestNodeStopSequence(t *testing.T) {
	h := newNodeHarness(t, Config{Capacity: 1}, NodeConfig{})
	h.step(Admit{On: true})
	h.enqueue(time.Time{}, "a")
	h.enqueue(time.Time{}, "b")
	h.settle() // a started: its Started record was in the enqueues' batch
	if got := strings.Join(h.take(), "; "); got != "write; landed 3; ack 1 id 1; ack 2 id 2; start 1#1" {
		t.Fatalf("before the stop: %s", got)
	}
	h.step(Close{Compact: true})
	h.pump()
	if h.n.Status().Closed {
		t.Fatal("closed with an attempt running")
	}
	h.step(Clock{Now: epoch.Add(time.Second)}) // the first grace ends: cancel
	h.pump()
	h.step(Clock{Now: epoch.Add(2 * time.Second)}) // the second: abandon
	h.pump()
	if !h.sync.Empty() {
		h.land(nil)
		h.pump()
	}
	got := strings.Join(h.take(), "; ")
	want := "cancel 1#1 stop; compact; close"
	if got != want {
		t.Fatalf("stop sequence:\n got %s\nwant %s", got, want)
	}
}

// TestNodeStopFlushesBeforeClose: an outcome stepped during the stop's last flight is written
// and synced (the flush) before the compaction and Close.
func TestNodeStopFlushesBeforeClose(t *testing.T) {
	h := newNodeHarness(t, Config{Capacity: 1}, NodeConfig{})
	h.step(Admit{On: true})
	h.enqueue(time.Time{}, "a")
	h.enqueue(epoch.Add(time.Hour), "b")
	h.settle() // a's Started durable
	h.take()
	h.step(Close{Compact: true})
	h.step(Ended{Token: Token{ID: 1, Attempt: 1}, Outcome: Success()})
	h.pump()
	if h.sync.Empty() {
		t.Fatal("the outcome at the stop was not flushed")
	}
	h.land(nil)
	h.pump()
	got := strings.Join(h.take(), "; ")
	if want := "write; landed 1; compact; close"; got != want {
		t.Fatalf("stop with an outcome:\n got %s\nwant %s", got, want)
	}
	snap, err := Replay(h.d, journalName, Config{Capacity: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Jobs) != 2 || snap.Jobs[0].State != Succeeded {
		t.Fatalf("replayed %+v", snap.Jobs)
	}
}

// TestNodeRefusalsAndMisuse: a refused command is answered at once with its error; stepping a
// SyncDone with nothing in flight, and Ready twice, panic.
func TestNodeRefusalsAndMisuse(t *testing.T) {
	h := newNodeHarness(t, Config{}, NodeConfig{})
	h.ref++
	h.step(Propose{Ref: h.ref, Cmd: Cancel{ID: 99}})
	h.pump()
	if diff := cmp.Diff([]string{fmt.Sprintf("ack %d: %v: 99", h.ref, ErrNotFound)}, h.take()); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	mustPanic(t, "SyncDone with nothing in flight", func() { h.n.Step(SyncDone{}) })
	h.enqueue(time.Time{}, "x")
	_ = h.n.Ready()
	mustPanic(t, "Ready twice", func() { h.n.Ready() })
	h.n.Advance()
	mustPanic(t, "Propose of a Tick", func() { h.n.Step(Propose{Cmd: Tick{}}) })
}

func mustPanic(t *testing.T, what string, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s did not panic", what)
		}
	}()
	fn()
}

// TestNodeGatherBounds: Room counts down to 0 as a batch gathers GatherMax commands, and
// GatherBytesMax bytes end it too; SyncEach gives each command its own batch.
func TestNodeGatherBounds(t *testing.T) {
	h := newNodeHarness(t, Config{}, NodeConfig{GatherMax: 3, GatherBytesMax: 1 << 10})
	far := epoch.Add(time.Hour)
	for want := 3; want > 0; want-- {
		if got := h.n.Room(); got != want {
			t.Fatalf("Room = %d, want %d", got, want)
		}
		h.enqueue(far, "p")
	}
	if got := h.n.Room(); got != 0 {
		t.Fatalf("Room = %d after GatherMax commands", got)
	}
	h.pump()
	if got := h.n.Room(); got != 3 {
		t.Fatalf("Room = %d after the write", got)
	}
	h.enqueue(far, strings.Repeat("x", 1<<10))
	if got := h.n.Room(); got != 0 {
		t.Fatalf("Room = %d past GatherBytesMax", got)
	}
	s := newNodeHarness(t, Config{}, NodeConfig{SyncEach: true})
	s.enqueue(far, "a")
	if got := s.n.Room(); got != 0 {
		t.Fatalf("SyncEach: Room = %d after one command", got)
	}
}
