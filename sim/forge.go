package sim

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/sim/disk"
	"github.com/sluicehq/sluice/sim/forge"
	"github.com/sluicehq/sluice/sim/internal/lazyrand"
)

// Forged damage (package forge builds it): synced bytes rewritten so that every checksum still
// matches. The damage family forges a frame, a schedule record or the clean-close mark of a
// damaged node's disk; the replay check forges a copy. Open, journal.Scan and runner.Replay
// must refuse each as corruption (corruption-refused), never apply it. Draws come from the
// world's "forge" stream and the nodes' "forge-schedule/<node>/<crash>" and
// "forge-copy/<node>/<commit>" streams, so no other draw moves.

// forgeMark forges the clean-close mark of node n's journal, just closed cleanly (forge.Mark).
// It reports whether it forged.
func (w *World) forgeMark(n *runnerNode) bool {
	b, err := readAll(n.disk, journalName)
	if err != nil {
		return false
	}
	forged := append([]byte(nil), b...)
	what := forge.Mark(w.rForge, forged)
	if what == "" {
		return false
	}
	flipDiff(n, b, forged)
	n.flipped = what
	w.fault("forged-mark")
	w.trace(n.name, "FORGE "+n.flipped)
	return true
}

// flipDiff flips on node n's journal every bit where forged differs from b.
func flipDiff(n *runnerNode, b, forged []byte) {
	for i := range forged {
		for d := forged[i] ^ b[i]; d != 0; d &= d - 1 {
			n.disk.FlipBit(journalName, int64(i), uint(bits.TrailingZeros8(d)))
		}
	}
}

// forgeOnDisk runs forger over a copy of node n's journal (frames wholly before end), flips on
// the disk every bit the forger changed, and counts and traces it as fault. It reports
// whether the forger found something to forge.
func (w *World) forgeOnDisk(n *runnerNode, end, last int64, fault string, forger func(b []byte, end int) string) bool {
	b, err := readAll(n.disk, journalName)
	if err != nil || int64(len(b)) < end {
		return false
	}
	forged := append([]byte(nil), b...)
	what := forger(forged, int(end))
	if what == "" {
		return false
	}
	flipDiff(n, b, forged)
	n.flipped = fmt.Sprintf("%s (synced; %d later bytes of complete batches)", what, last-end)
	w.fault(fault)
	w.trace(n.name, "FORGE "+n.flipped)
	return true
}

// forgeScheduleFrame is the hook from the damage family (world.go): it reports whether it
// forged a schedule record or a snapshot's schedules of node n's journal, before end.
func (w *World) forgeScheduleFrame(n *runnerNode, end, last int64) bool {
	r := Stream(w.cfg.Seed, "forge-schedule/"+n.name+"/"+strconv.Itoa(n.disk.Crashes()))
	if r.Intn(2) == 0 {
		return false
	}
	return w.forgeOnDisk(n, end, last, "forged-schedule", func(b []byte, end int) string { return forge.Schedule(r, b, end) })
}

// checkForgedCopy is the same forgery on a copy (cp: the node's files, copied for the
// replay-equals-live check after a commit), one replay check in four: the copy's journal gets
// one schedule record or snapshot forged before its last complete batch, and runner.Replay of
// it must refuse it as corruption (corruption-refused). The node's own disk is not touched, so
// every seed with schedules checks the refusals, not only the damage family's.
func (n *runnerNode) checkForgedCopy(cp *disk.Disk) {
	w := n.w
	r := Stream(w.cfg.Seed, "forge-copy/"+n.name+"/"+strconv.Itoa(n.commits))
	if r.Intn(4) != 0 || len(n.boundaries) < 2 {
		return
	}
	b, err := core.ReadFile(cp, journalName)
	end := n.boundaries[len(n.boundaries)-2]
	if err != nil || int64(len(b)) < end {
		return
	}
	var what string
	if r.Intn(4) == 0 {
		// A rewrite of the whole file can also leave a field out.
		if img, w := forge.ScheduleResized(r, b, int(end)); img != nil {
			b, what = img, w
		}
	}
	if what == "" {
		what = forge.Schedule(r, b, int(end))
	}
	if what == "" {
		return
	}
	if err := writeSynced(cp, journalName, b); err != nil {
		w.chk.Fail(InvMachine, "%s: writing a forged copy: %v", n.name, err)
		return
	}
	cfg := n.cfg
	cfg.Rand = lazyrand.New(1) // never draw from the live engine's stream
	_, err = runner.Replay(cp, journalName, cfg)
	if !refusal(err, what) {
		w.chk.Fail(InvCorruptionRefused, "%s: a copy of its journal with %s replayed with %v, want a refusal naming corruption", n.name, what, err)
		return
	}
	w.chk.Pass(InvCorruptionRefused)
	w.trace(n.name, "forged copy refused: "+what)
}
