package worker

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/lease"
)

// Describe renders r and the machine's next wake (zero: none) deterministically, with times
// as offsets from epoch, one effect a line.
func Describe(r Ready, wake, epoch time.Time) string {
	var b strings.Builder
	for _, c := range r.Cancel {
		fmt.Fprintf(&b, "cancel %s (%s)\n", c.Receipt, c.Reason)
	}
	for _, id := range r.AbandonCalls {
		fmt.Fprintf(&b, "abandon call=%d\n", id)
	}
	if r.AbandonReceive != 0 {
		fmt.Fprintf(&b, "abandon receive call=%d\n", r.AbandonReceive)
	}
	for _, s := range r.Start {
		fmt.Fprintf(&b, "start %s (%s, receive count %d)\n", s.Receipt, s.Message.ID, s.Message.ReceiveCount)
	}
	b.WriteString(lease.Describe(lease.Ready{Changes: r.Changes, Deletes: r.Deletes}, time.Time{}, epoch))
	if rc := r.Receive; rc != nil {
		fmt.Fprintf(&b, "receive call=%d max=%d wait=%v visibility=%v stamp=%s\n",
			rc.Call, rc.Max, rc.Wait, rc.Visibility, lease.Offset(rc.Stamp, epoch))
	}
	if !wake.IsZero() {
		fmt.Fprintf(&b, "wake %s\n", lease.Offset(wake, epoch))
	}
	return b.String()
}

// DescribeStatus renders the counters that scenario files show.
func DescribeStatus(s Status) string {
	return fmt.Sprintf("received=%d started=%d succeeded=%d released=%d permanent=%d terminal=%d "+
		"retired=%d poison=%d poison-acked=%d dropped=%d cancelled=%d ignored=%d released-at-end=%d "+
		"receive-errors=%d running=%d waiting=%d budget=%d stopping=%v done=%v%s\n",
		s.Received, s.Started, s.Succeeded, s.Released, s.Permanent, s.Terminal, s.Retired, s.Poison,
		s.PoisonAcked, s.Dropped, s.Cancelled, s.IgnoredDone, s.ReleasedAtEnd, s.ReceiveErrors,
		s.Running, s.Waiting, s.Budget, s.Stopping, s.Done, describeRare(s))
}

// describeRare renders the counters of rare events only when they are not zero, so scenario
// files that never meet them stay as they were.
func describeRare(s Status) string {
	var b strings.Builder
	for _, c := range []struct {
		name string
		n    int
	}{{"released-extra", s.ReleasedExtra}, {"bad-replies", s.BadReplies},
		{"receives-abandoned", s.ReceivesAbandoned}, {"handlers-abandoned", s.HandlersAbandoned}} {
		if c.n != 0 {
			fmt.Fprintf(&b, " %s=%d", c.name, c.n)
		}
	}
	if s.Err != nil {
		fmt.Fprintf(&b, " err=%q", s.Err.Error())
	}
	return b.String()
}
