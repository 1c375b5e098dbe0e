package runner

import (
	"fmt"
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

// DescribeJob renders one job on one line, times as offsets from epoch.
func DescribeJob(j Job, epoch time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %d target=%s %v", j.ID, j.Target, j.State)
	if j.State == Dead {
		fmt.Fprintf(&b, "(%v)", j.Reason)
	}
	if j.Deferred {
		b.WriteString(" deferred")
	}
	fmt.Fprintf(&b, " attempts=%d", j.Attempts)
	if j.State == Waiting {
		fmt.Fprintf(&b, " due=%s", offset(j.Due, epoch))
	}
	if j.LastErr != "" {
		fmt.Fprintf(&b, " err=%q", j.LastErr)
	}
	b.WriteString(describeOpts(j.Opts))
	for i, h := range j.History {
		sep := ","
		if i == 0 {
			sep = " history="
		}
		fmt.Fprintf(&b, "%s%d:%v", sep, h.Attempt, h.Outcome)
	}
	return b.String()
}

// describeOpts renders the options that differ from the defaults (nothing for none).
func describeOpts(o Opts) string {
	var b strings.Builder
	if o.Priority != 0 {
		fmt.Fprintf(&b, " priority=%d", o.Priority)
	}
	if o.AttemptsMax != 0 {
		fmt.Fprintf(&b, " attempts-max=%d", o.AttemptsMax)
	}
	if o.Deadline != 0 {
		fmt.Fprintf(&b, " deadline=%v", o.Deadline)
	}
	if o.Kind != "" {
		fmt.Fprintf(&b, " kind=%s", o.Kind)
	}
	if o.Unique != "" {
		fmt.Fprintf(&b, " unique=%q", o.Unique)
	}
	if o.UniqueFor != 0 {
		fmt.Fprintf(&b, " unique-for=%v", o.UniqueFor)
	}
	return b.String()
}

// Describe renders a state, one job per line, ascending by id.
func Describe(s Snapshot, epoch time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "next id %d\n", s.NextID)
	for _, j := range s.Jobs {
		b.WriteString(DescribeJob(j, epoch))
		b.WriteByte('\n')
	}
	for _, w := range s.Windows {
		fmt.Fprintf(&b, "window kind=%s unique=%q job %d until %s\n", w.Kind, w.Unique, w.ID, offset(w.Until, epoch))
	}
	for _, sc := range s.Schedules {
		b.WriteString(DescribeSchedule(sc, epoch))
		b.WriteByte('\n')
	}
	return b.String()
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
	b.WriteString(describeOpts(s.Opts))
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
