package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/core"
)

// TestFaultClassification pins core.ClassOf on the errors a transport returns and what the
// machine does with a renewal reply of each class (docs/worker.md).
func TestFaultClassification(t *testing.T) {
	type got struct {
		Class   core.Class
		Dropped string // drop reason, "" when still held
		Next    string // the receipt's next action, as an offset
	}
	te := func(c core.Class, code string) error {
		return &core.TransportError{Class: c, Op: "change-visibility", Code: code, Err: errors.New("x")}
	}
	for _, tc := range []struct {
		name string
		err  error
		want got
	}{
		{"success", nil, got{0, "", "+20.066666666s"}},
		{"throttling", te(core.Retryable, "ThrottlingException"), got{core.Retryable, "", "+10.3s"}},
		{"a 5xx wrapped by the caller", fmt.Errorf("renew: %w", te(core.Retryable, "InternalError")), got{core.Retryable, "", "+10.3s"}},
		{"an unclassified error counts as retryable", errors.New("connection reset by peer"), got{core.Retryable, "", "+10.3s"}},
		{"receipt invalid", te(core.Gone, "ReceiptHandleIsInvalid"), got{core.Gone, "gone", ""}},
		{"not in flight, wrapped", fmt.Errorf("batch entry 3: %w", te(core.Gone, "MessageNotInflight")), got{core.Gone, "gone", ""}},
		{"access denied", te(core.Fatal, "AccessDenied"), got{core.Fatal, "fatal", ""}},
		{"a TransportError without a class is not a success", te(0, ""), got{0, "", "+10.3s"}},
		{"an unknown class counts as retryable", te(core.Class(9), ""), got{core.Class(9), "", "+10.3s"}},
	} {
		m := mustNew(Config{})
		if err := m.Step(Received{Now: sec(0), Stamp: sec(0), Window: 30 * time.Second, Ceiling: 12 * time.Hour,
			Messages: []core.Message{{ID: "m1", Receipt: "r1", ReceiveCount: 1}}}); err != nil {
			t.Fatal(err)
		}
		m.Ready()
		if err := m.Step(Tick{Now: sec(10)}); err != nil {
			t.Fatal(err)
		}
		call := m.Ready().Changes[0].Call
		if err := m.Step(RenewResult{Call: call, Now: sec(10.1), Entries: []error{tc.err}}); err != nil {
			t.Fatal(err)
		}
		g := got{Class: core.ClassOf(tc.err)}
		for _, c := range m.Ready().Cancel {
			g.Dropped = c.Reason.String()
		}
		if l, ok := m.Lease("r1"); ok {
			g.Next = Offset(l.Next, epoch)
		}
		if diff := cmp.Diff(tc.want, g); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
