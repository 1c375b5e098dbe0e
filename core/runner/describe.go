package runner

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// offset renders t as an offset from epoch ("+1.5s"), the way traces print times.
func offset(t, epoch time.Time) string {
	d := t.Sub(epoch)
	if d < 0 {
		return d.String()
	}
	return "+" + d.String()
}

// appendOffset appends offset(t, epoch) to b.
func appendOffset(b []byte, t, epoch time.Time) []byte {
	d := t.Sub(epoch)
	if d >= 0 {
		b = append(b, '+')
	}
	return append(b, d.String()...)
}

// DescribeJob renders one job on one line, times as offsets from epoch.
func DescribeJob(j Job, epoch time.Time) string {
	return string(appendJob(make([]byte, 0, 96), &j, epoch))
}

// appendJob appends DescribeJob's line (the simulator traces every job a recovery finds, so
// this appends instead of going through fmt).
func appendJob(b []byte, j *Job, epoch time.Time) []byte {
	b = append(b, "job "...)
	b = strconv.AppendUint(b, j.ID, 10)
	b = append(b, " target="...)
	b = append(b, j.Target...)
	b = append(b, ' ')
	b = append(b, j.State.String()...)
	if j.State == Dead {
		b = append(b, '(')
		b = append(b, j.Reason.String()...)
		b = append(b, ')')
	}
	if j.Deferred {
		b = append(b, " deferred"...)
	}
	b = append(b, " attempts="...)
	b = strconv.AppendInt(b, int64(j.Attempts), 10)
	if j.State == Waiting {
		b = append(b, " due="...)
		b = appendOffset(b, j.Due, epoch)
	}
	if j.LastErr != "" {
		b = append(b, " err="...)
		b = strconv.AppendQuote(b, j.LastErr)
	}
	b = appendOpts(b, j.Opts)
	for i, h := range j.History {
		if i == 0 {
			b = append(b, " history="...)
		} else {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(h.Attempt), 10)
		b = append(b, ':')
		b = append(b, h.Outcome.String()...)
	}
	return b
}

// DescribeOpts renders the options that differ from the defaults, each after a space
// (nothing for none).
func DescribeOpts(o Opts) string { return string(appendOpts(nil, o)) }

func appendOpts(b []byte, o Opts) []byte {
	if o.Priority != 0 {
		b = append(b, " priority="...)
		b = strconv.AppendInt(b, int64(o.Priority), 10)
	}
	if o.AttemptsMax != 0 {
		b = append(b, " attempts-max="...)
		b = strconv.AppendInt(b, int64(o.AttemptsMax), 10)
	}
	if o.Deadline != 0 {
		b = append(b, " deadline="...)
		b = append(b, o.Deadline.String()...)
	}
	if o.Kind != "" {
		b = append(b, " kind="...)
		b = append(b, o.Kind...)
	}
	if o.Unique != "" {
		b = append(b, " unique="...)
		b = strconv.AppendQuote(b, o.Unique)
	}
	if o.Key != "" {
		b = append(b, " key="...)
		b = strconv.AppendQuote(b, o.Key)
	}
	if o.Group != "" {
		b = append(b, " group="...)
		b = strconv.AppendQuote(b, o.Group)
	}
	if o.Hold {
		b = append(b, " hold"...)
	}
	if o.Timeout != 0 {
		b = append(b, " timeout="...)
		b = append(b, o.Timeout.String()...)
	}
	if o.UniqueFor != 0 {
		b = append(b, " unique-for="...)
		b = append(b, o.UniqueFor.String()...)
	}
	return b
}

// Describe renders a state, one job per line, ascending by id.
func Describe(s Snapshot, epoch time.Time) string {
	b := make([]byte, 0, 32+80*len(s.Jobs))
	b = append(b, "next id "...)
	b = strconv.AppendUint(b, s.NextID, 10)
	b = append(b, '\n')
	for i := range s.Jobs {
		b = appendJob(b, &s.Jobs[i], epoch)
		b = append(b, '\n')
	}
	for _, w := range s.Windows {
		b = fmt.Appendf(b, "window kind=%s unique=%q job %d until %s\n", w.Kind, w.Unique, w.ID, offset(w.Until, epoch))
	}
	for _, sc := range s.Schedules {
		b = append(b, DescribeSchedule(sc, epoch)...)
		b = append(b, '\n')
	}
	return string(b)
}

// DescribeSchedule renders one schedule on one line, times as offsets from epoch.
func DescribeSchedule(s Schedule, epoch time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "schedule %s spec=%q target=%s payload=%q", s.Name, s.Spec, s.Target, s.Payload)
	if s.CatchUp != CatchUpOne {
		fmt.Fprintf(&b, " catch-up=%v", s.CatchUp)
	}
	if s.Next.IsZero() {
		b.WriteString(" next=none")
	} else {
		fmt.Fprintf(&b, " next=%s", offset(s.Next, epoch))
	}
	if !s.Last.IsZero() {
		fmt.Fprintf(&b, " last=%s at=%s job=%d", offset(s.Last, epoch), offset(s.LastAt, epoch), s.LastJob)
	}
	fmt.Fprintf(&b, " fired=%d", s.Fired)
	b.WriteString(DescribeOpts(s.Opts))
	return b.String()
}

// DescribeResult renders a Commit's result.
func DescribeResult(r Result, epoch time.Time) string {
	var b strings.Builder
	for _, a := range r.Acks {
		if a.IDs != nil {
			fmt.Fprintf(&b, "ack ticket %d jobs %v", a.Ticket, a.IDs)
			for i, d := range a.Duplicates {
				if d {
					fmt.Fprintf(&b, " [%d]=duplicate", i)
				}
			}
			b.WriteByte('\n')
			continue
		}
		if a.ID == 0 { // a schedule command
			fmt.Fprintf(&b, "ack ticket %d\n", a.Ticket)
			continue
		}
		fmt.Fprintf(&b, "ack ticket %d job %d", a.Ticket, a.ID)
		if a.Duplicate {
			b.WriteString(" (duplicate)")
		}
		b.WriteByte('\n')
	}
	for _, a := range r.Starts {
		fmt.Fprintf(&b, "start %v target=%s", a.Token, a.Target)
		if a.Kind != "" {
			fmt.Fprintf(&b, " kind=%s", a.Kind)
		}
		if a.Probe {
			b.WriteString(" probe")
		}
		if a.Timeout > 0 {
			fmt.Fprintf(&b, " timeout=%v", a.Timeout)
		}
		b.WriteByte('\n')
	}
	for _, c := range r.Cancels {
		fmt.Fprintf(&b, "cancel %v (%v)\n", c.Token, c.Why)
	}
	if !r.Wake.IsZero() {
		fmt.Fprintf(&b, "wake %s\n", offset(r.Wake, epoch))
	}
	if r.Compacted {
		b.WriteString("compacted\n")
	}
	if r.CompactErr != nil {
		fmt.Fprintf(&b, "compaction failed: %v\n", r.CompactErr)
	}
	return b.String()
}
