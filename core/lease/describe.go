package lease

import (
	"fmt"
	"strconv"
	"time"
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
	for _, c := range r.Changes {
		b = append(b, c.Purpose.String()...)
		b = append(b, " call="...)
		b = strconv.AppendUint(b, uint64(c.Call), 10)
		for _, e := range c.Entries {
			b = append(b, ' ')
			b = append(b, e.Receipt...)
			b = append(b, '=')
			b = append(b, e.Timeout.String()...)
		}
		b = append(b, " until="...)
		b = AppendOffset(b, c.Deadline, epoch)
		b = append(b, '\n')
	}
	for _, d := range r.Deletes {
		b = append(b, "delete call="...)
		b = strconv.AppendUint(b, uint64(d.Call), 10)
		b = append(b, ' ')
		for i, rc := range d.Receipts {
			if i > 0 {
				b = append(b, ' ')
			}
			b = append(b, rc...)
		}
		b = append(b, " until="...)
		b = AppendOffset(b, d.Deadline, epoch)
		b = append(b, '\n')
	}
	for _, id := range r.Abandon {
		b = append(b, "abandon call="...)
		b = strconv.AppendUint(b, uint64(id), 10)
		b = append(b, '\n')
	}
	for _, e := range r.Ended {
		if e.Err != nil {
			b = fmt.Appendf(b, "ended %s %s err=%v\n", e.Receipt, e.Kind, e.Err)
		} else {
			b = append(b, "ended "...)
			b = append(b, e.Receipt...)
			b = append(b, ' ')
			b = append(b, e.Kind.String()...)
			b = append(b, '\n')
		}
	}
	if !wake.IsZero() {
		b = append(b, "wake "...)
		b = AppendOffset(b, wake, epoch)
		b = append(b, '\n')
	}
	return string(b)
}

// Offset renders t as "+d" from epoch (d in Go duration syntax), or "-d" before it.
func Offset(t, epoch time.Time) string {
	d := t.Sub(epoch)
	if d < 0 {
		return "-" + (-d).String()
	}
	return "+" + d.String()
}

// AppendOffset appends Offset(t, epoch) to b.
func AppendOffset(b []byte, t, epoch time.Time) []byte {
	d := t.Sub(epoch)
	if d < 0 {
		b = append(b, '-')
		d = -d
	} else {
		b = append(b, '+')
	}
	return append(b, d.String()...)
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
