package runner

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"pgregory.net/rapid"
)

// The machine keeps a job in its own smaller form (dues as UnixNano, options shared): its
// public view must be the Job it was built from, field for field, for any due in TimeRange.
func TestJobViewIsTheJobItWasBuiltFrom(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		at := func(label string) time.Time {
			return norm(time.Unix(0, rapid.Int64().Draw(t, label)))
		}
		v := Job{
			ID: rapid.Uint64().Draw(t, "id"), Target: rapid.String().Draw(t, "target"),
			Payload: rapid.SliceOf(rapid.Byte()).Draw(t, "payload"),
			State:   JobState(rapid.Uint8().Draw(t, "state")), Reason: Reason(rapid.Uint8().Draw(t, "reason")),
			Attempts: rapid.Int().Draw(t, "attempts"), FirstDue: at("firstDue"), Due: at("due"),
			Deferred: rapid.Bool().Draw(t, "deferred"), LastErr: rapid.String().Draw(t, "lastErr"),
			TermSeq: rapid.Uint64().Draw(t, "termSeq"),
			Opts: Opts{Priority: rapid.Int().Draw(t, "priority"), Kind: rapid.String().Draw(t, "kind"),
				Unique: rapid.String().Draw(t, "unique"), UniqueFor: time.Duration(rapid.Int64().Draw(t, "uniqueFor"))},
		}
		for range rapid.IntRange(0, 3).Draw(t, "history") {
			v.History = append(v.History, AttemptRecord{Attempt: rapid.Int().Draw(t, "attempt"), Start: at("start"), End: at("end"),
				Outcome: AttemptOutcome(rapid.Uint8().Draw(t, "outcome")), Err: rapid.String().Draw(t, "err")})
		}
		opts := v.Opts
		var j job
		j.fromView(&v, &opts)
		var got Job
		j.view(&got)
		if d := cmp.Diff(v, got); d != "" {
			t.Fatalf("view differs from the job it was built from (-built +view):\n%s", d)
		}
		if got.Opts = (Opts{}); opts != v.Opts {
			t.Fatalf("writing the view's options changed the shared copy: %+v", opts)
		}
	})
}
