package queue

import (
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluicehq/sluice/core"
)

var t0 = Epoch

func at(d time.Duration) time.Time { return t0.Add(d) }

// errSummary renders an error as "class/code" ("ok" for nil) so tables can compare them.
func errSummary(err error) string {
	if err == nil {
		return "ok"
	}
	te, ok := err.(*core.TransportError)
	if !ok {
		return "untyped: " + err.Error()
	}
	return te.Class.String() + "/" + te.Code
}

func errSummaries(errs []error) []string {
	out := make([]string, len(errs))
	for i, err := range errs {
		out[i] = errSummary(err)
	}
	return out
}

func mustInvariants(t *testing.T, qs ...*Queue) {
	t.Helper()
	for _, q := range qs {
		if err := q.checkInvariants(); err != nil {
			t.Fatalf("invariants: %v", err)
		}
	}
}

func TestReceiveOrderReceiptsAndRedelivery(t *testing.T) {
	q := New(Config{Name: "jobs"}, nil)
	a := q.Send(at(0), []byte("a"))
	b := q.Send(at(0), []byte("b"))
	c := q.Send(at(1*time.Second), []byte("c"))
	if diff := cmp.Diff([]string{"jobs-1", "jobs-2", "jobs-3"}, []string{a, b, c}); diff != "" {
		t.Fatalf("ids (-want +got):\n%s", diff)
	}
	got := q.Receive(at(2*time.Second), 2, 10*time.Second)
	want := []core.Message{
		{ID: "jobs-1", Receipt: "jobs/1/1", Body: []byte("a"), ReceiveCount: 1},
		{ID: "jobs-2", Receipt: "jobs/2/1", Body: []byte("b"), ReceiveCount: 1},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("first receive (-want +got):\n%s", diff)
	}
	// b is released at 5 s; c has been visible since 1 s, so c comes first.
	if err := q.ChangeVisibility(at(5*time.Second), "jobs/2/1", 0); err != nil {
		t.Fatal(err)
	}
	got = q.Receive(at(5*time.Second), 10, 10*time.Second)
	want = []core.Message{
		{ID: "jobs-3", Receipt: "jobs/3/1", Body: []byte("c"), ReceiveCount: 1},
		{ID: "jobs-2", Receipt: "jobs/2/2", Body: []byte("b"), ReceiveCount: 2},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("second receive (-want +got):\n%s", diff)
	}
	// a's window (2 s + 10 s) lapses at 12 s exactly.
	if got := q.Receive(at(12*time.Second-1), 10, 10*time.Second); len(got) != 0 {
		t.Fatalf("receive before a's window lapsed: %v", got)
	}
	next, ok := q.NextVisibleAt()
	if !ok || !next.Equal(at(12*time.Second)) {
		t.Fatalf("NextVisibleAt = %v, %v; want +12s", next.Sub(t0), ok)
	}
	got = q.Receive(at(12*time.Second), 10, 10*time.Second)
	want = []core.Message{{ID: "jobs-1", Receipt: "jobs/1/2", Body: []byte("a"), ReceiveCount: 2}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("redelivery (-want +got):\n%s", diff)
	}
	mustInvariants(t, q)
}

func TestStaleAndInvalidReceipts(t *testing.T) {
	for _, mode := range []StaleDelete{StaleDeleteGone, StaleDeleteIgnored} {
		q := New(Config{StaleDelete: mode}, nil)
		q.Send(at(0), []byte("x"))
		old := q.Receive(at(0), 1, time.Second)[0].Receipt
		cur := q.Receive(at(time.Second), 1, time.Second)[0].Receipt
		if old == cur {
			t.Fatalf("redelivery kept receipt %q", old)
		}
		wantDelete := "gone/ReceiptHandleIsInvalid"
		if mode == StaleDeleteIgnored {
			wantDelete = "ok"
		}
		got := []string{
			errSummary(q.ChangeVisibility(at(time.Second), old, 5*time.Second)),
			errSummary(q.Delete(at(time.Second), old)),
			errSummary(q.ChangeVisibility(at(time.Second), "garbage", time.Second)),
			errSummary(q.Delete(at(time.Second), "garbage")),
			errSummary(q.Delete(at(time.Second), "q/1/9")),  // never issued
			errSummary(q.Delete(at(time.Second), "q/2/1")),  // no such message
			errSummary(q.Delete(at(time.Second), "q/01/2")), // not canonical
			errSummary(q.Delete(at(time.Second), "other/1/2")),
		}
		want := []string{"gone/ReceiptHandleIsInvalid", wantDelete, "gone/ReceiptHandleIsInvalid",
			"gone/ReceiptHandleIsInvalid", "gone/ReceiptHandleIsInvalid", "gone/ReceiptHandleIsInvalid",
			"gone/ReceiptHandleIsInvalid", "gone/ReceiptHandleIsInvalid"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("mode %d (-want +got):\n%s", mode, diff)
		}
		// Nothing above touched the current delivery.
		if !q.HiddenAt(at(time.Second), cur) {
			t.Fatalf("mode %d: current delivery no longer hidden", mode)
		}
		if err := q.Delete(at(time.Second), cur); err != nil {
			t.Fatal(err)
		}
		// Deleting again through the current receipt is idempotent; changing it is Gone.
		got = []string{
			errSummary(q.Delete(at(2*time.Second), cur)),
			errSummary(q.ChangeVisibility(at(2*time.Second), cur, time.Second)),
			errSummary(q.ChangeVisibility(at(2*time.Second), old, time.Second)),
		}
		want = []string{"ok", "gone/MessageNotInflight", "gone/MessageNotInflight"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("after delete, mode %d (-want +got):\n%s", mode, diff)
		}
		mustInvariants(t, q)
	}
}

func TestCeilingIsTwelveHoursFromThisDelivery(t *testing.T) {
	q := New(Config{}, nil)
	q.Send(at(0), []byte("x"))
	r := q.Receive(at(time.Hour), 1, 12*time.Hour)[0].Receipt // hidden until 13 h: the ceiling itself
	if err := q.ChangeVisibility(at(12*time.Hour), r, time.Hour); err != nil {
		t.Fatalf("extension exactly to the ceiling: %v", err)
	}
	err := q.ChangeVisibility(at(12*time.Hour), r, time.Hour+time.Second)
	if diff := cmp.Diff("fatal/InvalidParameterValue", errSummary(err)); diff != "" {
		t.Fatalf("past the ceiling (-want +got):\n%s", diff)
	}
	if got, _ := q.Message(at(12*time.Hour), "q-1"); !got.VisibleAt.Equal(at(13 * time.Hour)) {
		t.Fatalf("a refused extension changed visibility to %v", got.VisibleAt.Sub(t0))
	}
	if err := q.ChangeVisibility(at(12*time.Hour), r, -time.Second); errSummary(err) != "fatal/InvalidParameterValue" {
		t.Fatalf("negative timeout: %v", err)
	}
	// A redelivery starts a fresh 12 h.
	r2 := q.Receive(at(13*time.Hour), 1, 2*time.Hour)[0].Receipt
	if err := q.ChangeVisibility(at(14*time.Hour), r2, 11*time.Hour); err != nil {
		t.Fatalf("extension within the new delivery's ceiling: %v", err)
	}
	mustInvariants(t, q)
}

func TestLapsedExtensionModes(t *testing.T) {
	tests := []struct {
		mode          Lapsed
		wantErr       string
		wantVisibleAt time.Duration // after ChangeVisibility(+40s, receipt, 30s)
	}{
		{LapsedGone, "gone/MessageNotInflight", 30 * time.Second},
		{LapsedIgnore, "ok", 30 * time.Second},
		{LapsedExtend, "ok", 70 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			q := New(Config{Lapsed: tt.mode}, nil)
			q.Send(at(0), []byte("x"))
			r := q.Receive(at(0), 1, 30*time.Second)[0].Receipt
			// Within the window every mode extends.
			if err := q.ChangeVisibility(at(10*time.Second), r, 20*time.Second); err != nil {
				t.Fatal(err)
			}
			err := q.ChangeVisibility(at(40*time.Second), r, 30*time.Second)
			m, _ := q.Message(at(40*time.Second), "q-1")
			got := []any{errSummary(err), m.VisibleAt.Sub(t0)}
			if diff := cmp.Diff([]any{tt.wantErr, tt.wantVisibleAt}, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
			// Delete of a lapsed but current receipt deletes, in every mode.
			if err := q.Delete(at(41*time.Second), r); err != nil {
				t.Fatal(err)
			}
			if m, _ := q.Message(at(41*time.Second), "q-1"); m.State != Deleted {
				t.Fatalf("state %v after deleting a lapsed receipt", m.State)
			}
			mustInvariants(t, q)
		})
	}
}

func TestLapsedMixedIsSeededAndUsesAllModes(t *testing.T) {
	run := func(seed int64) []string {
		q := New(Config{Lapsed: LapsedMixed}, rand.New(rand.NewSource(seed)))
		var out []string
		for i := range 30 {
			q.Send(at(0), []byte("x"))
			r := q.Receive(at(time.Duration(i)*time.Minute), 1, time.Second)[0].Receipt
			out = append(out, errSummary(q.ChangeVisibility(at(time.Duration(i)*time.Minute+2*time.Second), r, time.Second)))
			q.Delete(at(time.Duration(i)*time.Minute+3*time.Second), r)
		}
		return out
	}
	a, b := run(7), run(7)
	if diff := cmp.Diff(a, b); diff != "" {
		t.Fatalf("same seed, different answers (-first +second):\n%s", diff)
	}
	seen := map[string]bool{}
	for _, s := range a {
		seen[s] = true
	}
	if !seen["ok"] || !seen["gone/MessageNotInflight"] {
		t.Fatalf("30 draws did not produce both answers: %v", a)
	}
}

func TestRedriveMovesOnTheReceiveThatWouldExceed(t *testing.T) {
	dlq := New(Config{Name: "dlq"}, nil)
	q := New(Config{Name: "jobs", DeadLetter: dlq, MaxReceiveCount: 2}, nil)
	q.Send(at(0), []byte("poison"))
	q.Send(at(0), []byte("fine"))
	var counts []int
	for i := range 3 {
		for _, m := range q.Receive(at(time.Duration(i)*time.Minute), 10, time.Second) {
			if m.ID == "jobs-1" {
				counts = append(counts, m.ReceiveCount)
			}
		}
	}
	if diff := cmp.Diff([]int{1, 2}, counts); diff != "" {
		t.Fatalf("deliveries of the poison message (-want +got):\n%s", diff)
	}
	if m, _ := q.Message(at(3*time.Minute), "jobs-1"); m.State != DeadLettered {
		t.Fatalf("poison message state %v", m.State)
	}
	// jobs-2 was received three times too: the third receive moved it as well.
	got := dlq.Receive(at(3*time.Minute), 10, time.Second)
	want := []core.Message{
		{ID: "jobs-1", Receipt: "dlq/1/3", Body: []byte("poison"), ReceiveCount: 3},
		{ID: "jobs-2", Receipt: "dlq/2/3", Body: []byte("fine"), ReceiveCount: 3},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("dead-letter queue (-want +got):\n%s", diff)
	}
	live, deleted, dead := q.Counts()
	if diff := cmp.Diff([]int{0, 0, 2}, []int{live, deleted, dead}); diff != "" {
		t.Fatalf("counts (-want +got):\n%s", diff)
	}
	// The last receipt before the move is no longer usable.
	if err := q.ChangeVisibility(at(3*time.Minute), "jobs/1/2", time.Second); errSummary(err) != "gone/MessageNotInflight" {
		t.Fatalf("change on a dead-lettered message: %v", err)
	}
	if err := q.Delete(at(3*time.Minute), "jobs/1/2"); errSummary(err) != "gone/ReceiptHandleIsInvalid" {
		t.Fatalf("delete of a dead-lettered message: %v", err)
	}
	mustInvariants(t, q, dlq)
}

func TestBatchAnswersPerEntryInOrder(t *testing.T) {
	q := New(Config{}, nil)
	for range 3 {
		q.Send(at(0), []byte("x"))
	}
	ms := q.Receive(at(0), 10, 30*time.Second)
	if err := q.Delete(at(0), ms[1].Receipt); err != nil {
		t.Fatal(err)
	}
	got := errSummaries(q.ChangeVisibilityBatch(at(time.Second), []core.VisibilityChange{
		{Receipt: ms[0].Receipt, Timeout: time.Minute},
		{Receipt: ms[1].Receipt, Timeout: time.Minute},
		{Receipt: ms[2].Receipt, Timeout: 13 * time.Hour},
		{Receipt: "nonsense", Timeout: 0},
		{Receipt: ms[2].Receipt, Timeout: 0},
	}))
	want := []string{"ok", "gone/MessageNotInflight", "fatal/InvalidParameterValue", "gone/ReceiptHandleIsInvalid", "ok"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("change-visibility batch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"q-3"}, ids(q.Receive(at(time.Second), 10, time.Second))); diff != "" {
		t.Fatalf("released entry (-want +got):\n%s", diff)
	}
	got = errSummaries(q.DeleteBatch(at(2*time.Second), []string{ms[0].Receipt, "q/9/1", ms[2].Receipt}))
	want = []string{"ok", "gone/ReceiptHandleIsInvalid", "gone/ReceiptHandleIsInvalid"} // ms[2] was redelivered
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("delete batch (-want +got):\n%s", diff)
	}
	mustInvariants(t, q)
}

func ids(ms []core.Message) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestMisusePanics(t *testing.T) {
	q := New(Config{}, nil)
	tests := map[string]func(){
		"receive max 0":          func() { q.Receive(at(0), 0, 0) },
		"receive max 11":         func() { q.Receive(at(0), 11, 0) },
		"receive visibility 13h": func() { q.Receive(at(0), 1, 13*time.Hour) },
		"empty batch":            func() { q.DeleteBatch(at(0), nil) },
		"batch of 11":            func() { q.DeleteBatch(at(0), make([]string, 11)) },
		"mixed without rng":      func() { New(Config{Lapsed: LapsedMixed}, nil) },
		"redrive without dlq":    func() { New(Config{MaxReceiveCount: 3}, nil) },
		"name with slash":        func() { New(Config{Name: "a/b"}, nil) },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatalf("%s did not panic", name)
				}
			}()
			f()
		})
	}
}

func TestTransportViewReportsMisuseAsFatal(t *testing.T) {
	q := New(Config{}, nil)
	tr := q.Transport(func() time.Time { return at(0) })
	_, err1 := tr.Receive(t.Context(), 11, 0, 0)
	_, err2 := tr.DeleteBatch(t.Context(), nil)
	_, err3 := tr.ChangeVisibilityBatch(t.Context(), make([]core.VisibilityChange, 11))
	got := []string{errSummary(err1), errSummary(err2), errSummary(err3)}
	want := []string{"fatal/InvalidParameterValue", "fatal/EmptyBatchRequest", "fatal/TooManyEntriesInBatchRequest"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestDescribe(t *testing.T) {
	dlq := New(Config{Name: "dlq"}, nil)
	q := New(Config{Name: "jobs", DeadLetter: dlq, MaxReceiveCount: 1}, nil)
	q.Send(at(0), []byte("a"))
	q.Send(at(0), []byte("b"))
	q.Send(at(0), []byte("c"))
	ms := q.Receive(at(time.Second), 2, 30*time.Second)
	q.Delete(at(2*time.Second), ms[1].Receipt)
	q.ChangeVisibility(at(2*time.Second), ms[0].Receipt, 0)
	q.Receive(at(3*time.Second), 10, 30*time.Second) // delivers jobs-3, moves jobs-1 (count 1 = max) to dlq
	want := `queue jobs at +3s: visible=0 in-flight=1 deleted=1 dead-lettered=1
  jobs-1 dead-lettered count=1 body="a"
  jobs-2 deleted count=1 body="b"
  jobs-3 in-flight count=1 visible-at=+33s receipt=jobs/3/1 received=+3s body="c"
`
	if diff := cmp.Diff(want, q.Describe(at(3*time.Second))); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}
