package netfault

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/sim/faults"
)

func TestCallClassesEachFate(t *testing.T) {
	for _, c := range []struct {
		fate  faults.Call
		class core.Class
		code  string
	}{
		{faults.CallFailBefore, core.Retryable, "RequestTimeout"},
		{faults.CallFailAfter, core.Retryable, "RequestTimeout"},
		{faults.CallThrottle, core.Retryable, "ThrottlingException"},
		{faults.CallServerError, core.Retryable, "InternalError"},
		{faults.CallFatal, core.Fatal, "AccessDenied"},
	} {
		var te *core.TransportError
		if err := Call(c.fate, "delete"); !errors.As(err, &te) || te.Class != c.class || te.Code != c.code || te.Op != "delete" {
			t.Errorf("%v: got %v, want class %v code %s", c.fate, err, c.class, c.code)
		}
	}
	if err := Call(faults.CallOK, "delete"); err != nil {
		t.Errorf("ok: got %v", err)
	}
	var te *core.TransportError
	if err := Stale("delete"); !errors.As(err, &te) || te.Class != core.Gone {
		t.Errorf("stale: got %v, want gone", err)
	}
}

func TestMiscountIsOneOff(t *testing.T) {
	two := []error{nil, nil}
	if got := len(Miscount(append([]error(nil), two...), true)); got != 1 {
		t.Errorf("fewer of 2: %d entries, want 1", got)
	}
	if got := len(Miscount(append([]error(nil), two...), false)); got != 3 {
		t.Errorf("more of 2: %d entries, want 3", got)
	}
	if got := len(Miscount([]error{nil}, true)); got != 2 {
		t.Errorf("fewer of 1: %d entries, want 2 (a reply never goes empty)", got)
	}
}
