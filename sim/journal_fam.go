package sim

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/journal"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/faults"
	"github.com/sluicehq/sluice/sim/forge"
)

// The journal's families: what production does to a runner's journal that the rest of the
// world rarely does, each with its own stream and its own check.
//
//   - A graceful stop's Close cut by a crash at the mark's write or its sync (faults.Process
//     .ClosePoint): the next open finds the mark whole, torn or absent, and must recover.
//   - A leftover <name>.compact whose removal, or the directory sync after it, fails at open
//     (faults.Disk.LeftoverErr): open must fail naming it and leave the journal as it was.
//   - A write that reports a short count without an error (faults.Disk.ShortWrite, drawn by
//     the disk): the journal must count it as a failure (io.ErrShortWrite), never as written.
//   - A driver still calling an engine it closed (one graceful stop in four): Close, Compact
//     and a commit of a new job must each be refused with journal.ErrClosed, writing nothing.
//   - A node whose SnapshotMax is the least allowed (RecordMax; one node in eight): its state
//     soon outgrows it, and every compaction must be refused with journal.ErrTooLarge before
//     anything is written, the old journal kept.
//   - Crash reports name what the crash left besides the tail: a clean-close mark (whole or
//     torn) and a leftover compaction file, rendered by journal.Describe.

// journalFam holds the families' own streams, made at first use.
type journalFam struct {
	rClose, rLeftover, rProbe, rAim *rand.Rand
	// aimedAt is, by node id, the offset an aimed damage's refusal must name.
	aimedAt map[int]int64
	// big holds, by node id, the payload stream of a node with big records.
	big map[int]*rand.Rand
}

func (w *World) jfam() *journalFam {
	if w.jf == nil {
		w.jf = &journalFam{
			rClose:    Stream(w.cfg.Seed, "close-point"),
			rLeftover: Stream(w.cfg.Seed, "leftover"),
			rProbe:    Stream(w.cfg.Seed, "closed-probe"),
			rAim:      Stream(w.cfg.Seed, "aimed-damage"),
			aimedAt:   map[int]int64{},
			big:       map[int]*rand.Rand{},
		}
	}
	return w.jf
}

// injected says whether err is the work of an injected disk fault: an error the disk returned
// (disk.ErrInjected), or the journal's io.ErrShortWrite for a short count reported without one.
func (w *World) injected(err error) bool {
	return Injected(err, w.cfg.Faults.Disk)
}

// bigRecordMax is the RecordMax of a node with big records: larger than the journal's read
// chunk (1 MiB), so that a scan reads such a frame's CRC a chunk at a time and a file holding
// one spans several chunks.
const bigRecordMax = 2 << 20

// drawJournalConfig draws a node's journal limits from its own streams: one node in eight
// gets the least SnapshotMax the runner allows (its RecordMax); one node in six of those
// that never compact (CompactBytes 64 MiB) takes big records (RecordMax bigRecordMax), and
// one of its jobs carries a payload over 1 MiB (bigPayload).
func (n *runnerNode) drawJournalConfig() {
	w := n.w
	// Preallocation: one node in four appends every batch; the others preallocate a few
	// bytes to a few KiB (the default's MiB would only multiply copies of zeros), so batches
	// both overwrite spare and extend the file, and crashes tear both.
	if r := Stream(w.cfg.Seed, "prealloc/"+n.name); r.Intn(4) == 0 {
		n.cfg.PreallocBytes = -1
	} else {
		n.cfg.PreallocBytes = 64 + r.Int63n(8192)
	}
	if w.cfg.CompactBytes >= 64<<20 && Stream(w.cfg.Seed, "big-records/"+n.name).Intn(6) == 0 {
		n.cfg.RecordMax = bigRecordMax
		w.jfam().big[n.id] = Stream(w.cfg.Seed, "big-payloads/"+n.name)
	}
	if Stream(w.cfg.Seed, "snapshot-max/"+n.name).Intn(8) == 0 {
		n.cfg.SnapshotMax = max(n.cfg.RecordMax, 1024)
	}
}

// bigPayload makes one payload of a node with big records (drawn one job in forty until it
// is made) longer than the journal's read chunk.
func (n *runnerNode) bigPayload(payload string, oversize bool) string {
	r := n.w.jfam().big[n.id]
	if r == nil || oversize || r.Intn(40) != 0 {
		return payload
	}
	n.w.fault("big-record")
	n.w.jfam().big[n.id] = nil // one per node: every later copy, replay and crash of its file pays for it
	return payload + n.w.repeated('z', 1<<20+r.Intn(bigRecordMax-1<<20-8192))
}

// checkCompactRefused checks a commit's compaction refused for its snapshot's size: a kept
// failure (the engine usable) that wrote nothing beyond the batch (a write and a sync).
func (n *runnerNode) checkCompactRefused(res runner.Result, ops int) {
	if res.CompactErr == nil || !errors.Is(res.CompactErr, journal.ErrTooLarge) {
		return
	}
	w := n.w
	if d := n.disk.Ops() - ops; d > 3 || n.e.Poisoned() != nil { // extend, write, sync
		w.chk.Fail(InvMachine, "%s: a compaction refused as too large (%v) made %d disk operations with its batch, or poisoned the engine (%v)",
			n.name, res.CompactErr, d, n.e.Poisoned())
		return
	}
	w.fault("snapshot-too-large")
	w.chk.Pass(InvMachine)
}

// leftoverArm is a failure armed at a leftover .compact's removal, and the journal's bytes
// before the open, which a failed open must not change.
type leftoverArm struct {
	op     disk.Op
	before string
}

// armLeftover arms, with probability LeftoverErr, the failure of the removal of a leftover
// <name>.compact (or of the directory sync after it) that the coming open will find.
func (n *runnerNode) armLeftover() *leftoverArm {
	w := n.w
	p := w.cfg.Faults.Disk.LeftoverErr
	if !w.faultsOn || p == 0 {
		return nil
	}
	var err error
	n.disk.WithoutReadFaults(func() { _, err = n.disk.Stat(journalName + ".compact") })
	if err != nil || !faults.Hit(w.jfam().rLeftover, p) {
		return nil
	}
	a := &leftoverArm{op: disk.OpRemove}
	if w.jfam().rLeftover.Intn(2) == 0 {
		a.op = disk.OpSyncDir
	}
	b, _ := readAll(n.disk, journalName)
	a.before = string(b)
	n.disk.FailNext(a.op, nil)
	w.fault("leftover-" + a.op.String())
	return a
}

// checkLeftover checks an open that met the armed failure: it failed, naming the leftover
// file, and the journal is byte for byte what it was. An armed failure the open did not reach
// (it failed earlier) is disarmed.
func (n *runnerNode) checkLeftover(a *leftoverArm, err error) {
	if a == nil {
		return
	}
	w := n.w
	if n.disk.Queued(a.op) > 0 {
		n.disk.Unfail(a.op)
		return
	}
	after, _ := readAll(n.disk, journalName)
	if err == nil || !errors.Is(err, disk.ErrInjected) || !strings.Contains(err.Error(), journalName+".compact") || string(after) != a.before {
		w.chk.Fail(InvRecoveryOpens, "%s: an open whose %s of the leftover compaction file failed returned %v (the journal changed: %v)",
			n.name, a.op, err, string(after) != a.before)
		return
	}
	w.chk.Pass(InvRecoveryOpens)
}

// closeEngine closes the node's engine at the end of a graceful stop. With probability
// ClosePoint a crash cuts Close at its k-th mutating disk operation (the mark's write, or its
// sync); the node then crashes there, and closeEngine reports it.
func (n *runnerNode) closeEngine() (err error, crashed bool) {
	w := n.w
	p := w.cfg.Faults.Process.ClosePoint
	if !w.faultsOn || p == 0 || !faults.Hit(w.jfam().rClose, p) {
		return n.e.Close(), false
	}
	k := 1 + w.jfam().rClose.Intn(faults.ClosePointOps)
	n.disk.CrashAfter(k)
	w.fault("close-point")
	ops := n.disk.Ops()
	err = n.e.Close()
	// A poisoned journal closes without the mark (no disk op), and an injected fault may stop
	// Close before op k; once Close reached op k, it must report the crash.
	if n.disk.Ops()-ops >= k && !errors.Is(err, disk.ErrCrashed) {
		w.chk.Fail(InvMachine, "%s: Close with a crash armed at its disk op %d returned %v", n.name, k, err)
		return err, true
	}
	n.crash("inside Close, at its disk op " + strconv.Itoa(k))
	return err, true
}

// probeClosed makes, one graceful stop in four, the calls a driver still holding the engine
// it closed would make: Close again, then a Compact or a commit of a new job. Each must be
// refused with journal.ErrClosed (or runner.ErrPoisoned by an engine a failure poisoned before
// it closed: that refusal comes first), and none may touch the disk.
func (n *runnerNode) probeClosed() {
	w := n.w
	r := w.jfam().rProbe
	if r.Intn(4) != 0 {
		return
	}
	ops := n.disk.Ops()
	poisoned := n.e.Poisoned() != nil
	before, _ := readAll(n.disk, journalName)
	errs := []error{n.e.Close()}
	if r.Intn(2) == 0 {
		errs = append(errs, n.e.Compact())
	} else {
		_, _, err := n.e.EnqueueJob(w.now(), runner.NewJob{Target: "t1", Payload: []byte("after-close"), Opts: runner.Opts{Kind: kindNames[0]}})
		if err == nil {
			_, err = n.e.Commit(w.now())
		}
		errs = append(errs, err)
	}
	after, _ := readAll(n.disk, journalName)
	for i, err := range errs {
		if !errors.Is(err, journal.ErrClosed) && !(poisoned && i > 0 && errors.Is(err, runner.ErrPoisoned)) {
			w.chk.Fail(InvMachine, "%s: call %d on a closed engine returned %v, not journal.ErrClosed", n.name, i+1, err)
			return
		}
	}
	if n.disk.Ops() != ops || string(after) != string(before) {
		w.chk.Fail(InvMachine, "%s: calls refused on a closed engine wrote to its disk (%d operations)", n.name, n.disk.Ops()-ops)
		return
	}
	w.fault("closed-probe")
	w.chk.Pass(InvMachine)
}

// traceFiles adds to a crash report what the crash left besides the tail: the journal's
// header when it holds a clean-close mark (whole or torn by the crash) or is damaged, and a
// leftover compaction file, as journal.Describe renders them.
func (n *runnerNode) traceFiles() {
	w := n.w
	if b, err := readHead(n.disk, journalName); err == nil {
		line := describeHead(b)
		if !strings.HasPrefix(line, "header ") || strings.Contains(line, "mark") || strings.Contains(line, "closed") {
			w.trace(n.name, "journal "+line)
		}
	}
	if b, err := readAll(n.disk, journalName+".compact"); err == nil {
		w.trace(n.name, "leftover "+journalName+".compact: "+oneLine(journal.Describe(b)))
	}
}

// readHead reads at most a journal header's bytes of the named file, past read faults.
func readHead(fsys *disk.Disk, name string) (b []byte, err error) {
	fsys.WithoutReadFaults(func() {
		var f core.File
		if f, err = fsys.Open(name); err != nil {
			return
		}
		defer f.Close()
		b = make([]byte, 41) // one more than a header: Describe names a longer file's frames
		var k int
		k, err = f.ReadAt(b, 0)
		b = b[:k]
		if err == io.EOF {
			err = nil
		}
	})
	return b, err
}

// describeHead is the first line of journal.Describe for b's header alone (the whole of b
// when it is no longer than a header, so a short file is named with its length).
func describeHead(b []byte) string {
	const headerLen = 40
	if len(b) > headerLen {
		b = b[:headerLen]
	}
	s := journal.Describe(b)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// aimRule damages node n's synced journal (before end, where its last complete batch starts)
// so that one of the journal's frame rules, or its header's, must refuse it (forge.Aim). Two
// damages of the damage family in three are aimed (its own stream); the refusal must name
// the offset aimed at. It reports whether it damaged.
func (w *World) aimRule(n *runnerNode, end, last int64) bool {
	r := w.jfam().rAim
	if r.Intn(3) == 0 {
		return false
	}
	b, err := readAll(n.disk, journalName)
	if err != nil || int64(len(b)) < end || len(b) < forge.FileHdr {
		return false
	}
	a := forge.Aim(r, b, int(end))
	switch {
	case a.What == "":
		return false
	case a.Cut > 0:
		n.disk.Cut(journalName, int64(a.Cut))
		n.flipped = fmt.Sprintf("the file cut to %d bytes, inside its header (%d later bytes of complete batches lost)", a.Cut, last-int64(a.Cut))
		w.fault("aimed-cut")
	default:
		old, _ := readAll(n.disk, journalName)
		flipDiff(n, old, b)
		n.flipped = fmt.Sprintf("the frame at byte %d rewritten with %s, its CRC resealed (synced; %d later bytes of complete batches)", a.At, a.What, last-end)
		w.fault("aimed-frame")
	}
	w.jfam().aimedAt[n.id] = a.At
	w.trace(n.name, "FORGE "+n.flipped)
	return true
}

// checkAimed checks that open's refusal of an aimed damage names the journal and the offset
// aimed at (the header's, the frame's, or the header's end for a snapshot it no longer holds).
func (n *runnerNode) checkAimed(err error) {
	jf := n.w.jfam()
	at, ok := jf.aimedAt[n.id]
	delete(jf.aimedAt, n.id)
	if !ok {
		return
	}
	var fe *journal.FormatError
	if !errors.As(err, &fe) || fe.File != journalName || fe.Offset != at {
		n.w.chk.Fail(InvCorruptionRefused, "%s: open refused an aimed damage at byte %d with %v, which does not name that file and offset", n.name, at, err)
		return
	}
	n.w.chk.Pass(InvCorruptionRefused)
}

// damageClosed damages, half the time (its own stream), a bit of the last batch of a damaged
// node's journal just closed cleanly: after a clean close no crash can explain a bad frame,
// so open must refuse it as corruption even though no later batch proves it.
func (n *runnerNode) damageClosed(closeErr error) {
	w := n.w
	if closeErr != nil || n.flipped != "" || !w.cfg.Faults.ExpectRefusal || !w.damaged(n.id) || w.jfam().rAim.Intn(2) != 0 {
		return
	}
	b, err := readAll(n.disk, journalName)
	if err != nil || n.disk.SettledLen(journalName) != int64(len(b)) {
		return
	}
	fs := forge.Frames(b, len(b))
	if len(fs) == 0 || fs[len(fs)-1].Off+forge.FrameHdr+fs[len(fs)-1].N != len(b) {
		return
	}
	start := fs[0].Off
	for _, f := range fs[:len(fs)-1] {
		if f.Flags&1 != 0 { // flagEnd: the next frame starts a batch
			start = f.Off + forge.FrameHdr + f.N
		}
	}
	off := int64(start + w.jfam().rAim.Intn(len(b)-start))
	bit := uint(w.jfam().rAim.Intn(8))
	n.disk.FlipBit(journalName, off, bit)
	n.flipped = fmt.Sprintf("bit %d of byte %d flipped in the last batch (at %d) of a cleanly closed journal", bit, off, start)
	w.fault("closed-flip")
	w.trace(n.name, "FLIP "+n.flipped)
}

// journalIntact says why node n's journal, after a crash, is not the file its boundaries
// describe ("" when it is): whole frames from the header to last, a batch ending at end and
// one at last. A crash that rolled back a directory change the engine never made durable (a
// create or a rename without its directory fsync) leaves another file under the name, or
// none: there is no synced data of the engine's to damage, and recovery answers for what
// was lost (no-lost-ack).
func (w *World) journalIntact(n *runnerNode, end, last int64) string {
	b, err := readAll(n.disk, journalName)
	switch {
	case err != nil:
		return journalName + " is gone after the crash: " + err.Error()
	case int64(len(b)) < last:
		return fmt.Sprintf("%s holds %d bytes after the crash, the engine's synced batches %d", journalName, len(b), last)
	}
	fs := forge.Frames(b, int(last))
	atEnd, atLast := end == forge.FileHdr, false
	for _, f := range fs {
		if f.Flags&1 == 0 { // flagEnd: a batch ends with this frame
			continue
		}
		stop := int64(f.Off + forge.FrameHdr + f.N)
		atEnd = atEnd || stop == end
		atLast = atLast || stop == last
	}
	if !atEnd || !atLast {
		return fmt.Sprintf("%s after the crash has no batches ending at bytes %d and %d, where the engine's did (another file is under its name)", journalName, end, last)
	}
	return ""
}

// checkEntryDurable checks, after what (an open, a compaction) returned success, that the
// journal's directory entry is durable: a crash now leaves the file the engine appends to
// under its name. A create or rename whose directory fsync was skipped is not, and a crash
// would give back the old file, or none, with every batch appended since lost.
func (n *runnerNode) checkEntryDurable(what string) {
	if n.disk.EntryDurable(journalName) {
		n.w.chk.Pass(InvJournalDurable)
		return
	}
	n.w.chk.Fail(InvJournalDurable, "%s: after %s returned success, the directory entry of %s is not durable: a crash now would leave another file, or none, under its name",
		n.name, what, journalName)
}

// fsys is the file system node n's engine runs on: its disk, or under mutNoDirSync one whose
// directory fsync does nothing (the planted defect of an engine that never syncs the
// directory after a create or a rename).
func (n *runnerNode) fsys() core.FS {
	if n.w.mutation == mutNoDirSync {
		return noDirSync{n.disk}
	}
	return n.disk
}

type noDirSync struct{ *disk.Disk }

func (noDirSync) SyncDir() error { return nil }
