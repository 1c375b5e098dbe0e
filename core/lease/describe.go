package lease

import (
	"fmt"
	"strings"
	"time"
)

// Describe renders r and the machine's next wake (zero: none) deterministically, with times
// as offsets from epoch, one effect a line.
func Describe(r Ready, wake, epoch time.Time) string {
	var b strings.Builder
	for _, c := range r.Cancel {
		fmt.Fprintf(&b, "cancel %s (%s)\n", c.Receipt, c.Reason)
	}
	for _, c := range r.Changes {
		fmt.Fprintf(&b, "%s call=%d", c.Purpose, c.Call)
		for _, e := range c.Entries {
			fmt.Fprintf(&b, " %s=%v", e.Receipt, e.Timeout)
		}
		fmt.Fprintf(&b, " until=%s\n", Offset(c.Deadline, epoch))
	}
	for _, d := range r.Deletes {
		fmt.Fprintf(&b, "delete call=%d %s until=%s\n", d.Call, strings.Join(d.Receipts, " "), Offset(d.Deadline, epoch))
	}
	for _, id := range r.Abandon {
		fmt.Fprintf(&b, "abandon call=%d\n", id)
	}
	for _, e := range r.Ended {
		if e.Err != nil {
			fmt.Fprintf(&b, "ended %s %s err=%v\n", e.Receipt, e.Kind, e.Err)
		} else {
			fmt.Fprintf(&b, "ended %s %s\n", e.Receipt, e.Kind)
		}
	}
	if !wake.IsZero() {
		fmt.Fprintf(&b, "wake %s\n", Offset(wake, epoch))
	}
	return b.String()
}

// Offset renders t as "+d" from epoch (d in Go duration syntax), or "-d" before it.
func Offset(t, epoch time.Time) string {
	d := t.Sub(epoch)
	if d < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

// DescribeLease renders one receipt's state, with times as offsets from epoch.
func DescribeLease(l Lease, epoch time.Time) string {
	s := fmt.Sprintf("%s %s deadline=%s", l.Receipt, l.Phase, Offset(l.Deadline, epoch))
	if !l.Next.IsZero() {
		s += " next=" + Offset(l.Next, epoch)
	}
	if l.Attempt > 0 {
		s += fmt.Sprintf(" attempt=%d", l.Attempt)
	}
	return s
}
