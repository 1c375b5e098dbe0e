package worker

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/lease"
)

// Describe renders r deterministically, with times as offsets from epoch, one effect a line.
func Describe(r Ready, epoch time.Time) string {
	var b strings.Builder
	for _, c := range r.Cancel {
		fmt.Fprintf(&b, "cancel %s (%s)\n", c.Receipt, c.Reason)
	}
	for _, s := range r.Start {
		fmt.Fprintf(&b, "start %s (%s, receive count %d)\n", s.Receipt, s.Message.ID, s.Message.ReceiveCount)
	}
	b.WriteString(lease.Describe(lease.Ready{Changes: r.Changes, Deletes: r.Deletes}, epoch))
	if rc := r.Receive; rc != nil {
		fmt.Fprintf(&b, "receive call=%d max=%d wait=%v visibility=%v stamp=%s\n",
			rc.Call, rc.Max, rc.Wait, rc.Visibility, lease.Offset(rc.Stamp, epoch))
	}
	if !r.WakeAt.IsZero() {
		fmt.Fprintf(&b, "wake %s\n", lease.Offset(r.WakeAt, epoch))
	}
	return b.String()
}

// DescribeStats renders the counters that scenario files show.
func DescribeStats(s Stats) string {
	return fmt.Sprintf("received=%d started=%d succeeded=%d released=%d permanent=%d terminal=%d "+
		"retired=%d poison=%d poison-acked=%d dropped=%d cancelled=%d ignored=%d released-at-end=%d "+
		"receive-errors=%d running=%d waiting=%d budget=%d stopping=%v done=%v\n",
		s.Received, s.Started, s.Succeeded, s.Released, s.Permanent, s.Terminal, s.Retired, s.Poison,
		s.PoisonAcked, s.Dropped, s.Cancelled, s.IgnoredDone, s.ReleasedAtEnd, s.ReceiveErrors,
		s.Running, s.Waiting, s.Budget, s.Stopping, s.Done)
}
