package worker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core/lease"
)

// Describe renders r and the machine's next wake (zero: none) deterministically, with times
// as offsets from epoch, one effect a line. (The simulator renders every step with it, so it
// appends instead of going through fmt.)
func Describe(r Ready, wake, epoch time.Time) string {
	b := make([]byte, 0, 128)
	for _, c := range r.Cancel {
		b = append(b, "cancel "...)
		b = append(b, c.Receipt...)
		b = append(b, " ("...)
		b = append(b, c.Reason.String()...)
		b = append(b, ")\n"...)
	}
	for _, id := range r.AbandonCalls {
		b = append(b, "abandon call="...)
		b = strconv.AppendUint(b, uint64(id), 10)
		b = append(b, '\n')
	}
	if r.AbandonReceive != 0 {
		b = append(b, "abandon receive call="...)
		b = strconv.AppendUint(b, uint64(r.AbandonReceive), 10)
		b = append(b, '\n')
	}
	for _, s := range r.Start {
		b = append(b, "start "...)
		b = append(b, s.Receipt...)
		b = append(b, " ("...)
		b = append(b, s.Message.ID...)
		b = append(b, ", receive count "...)
		b = strconv.AppendInt(b, int64(s.Message.ReceiveCount), 10)
		b = append(b, ")\n"...)
	}
	if len(r.Changes)+len(r.Deletes) > 0 {
		b = append(b, lease.Describe(lease.Ready{Changes: r.Changes, Deletes: r.Deletes}, time.Time{}, epoch)...)
	}
	if rc := r.Receive; rc != nil {
		b = append(b, "receive call="...)
		b = strconv.AppendUint(b, uint64(rc.Call), 10)
		b = append(b, " max="...)
		b = strconv.AppendInt(b, int64(rc.Max), 10)
		b = append(b, " wait="...)
		b = append(b, rc.Wait.String()...)
		b = append(b, " visibility="...)
		b = append(b, rc.Visibility.String()...)
		b = append(b, " stamp="...)
		b = lease.AppendOffset(b, rc.Stamp, epoch)
		b = append(b, '\n')
	}
	if !wake.IsZero() {
		b = append(b, "wake "...)
		b = lease.AppendOffset(b, wake, epoch)
		b = append(b, '\n')
	}
	return string(b)
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
