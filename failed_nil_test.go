package sluice

import (
	"errors"
	"testing"
)

// TestFailedWithNilErrorIsAFailure: Failed(nil, ...) returns a failure naming the mistake
// instead of panicking in the user's handler.
func TestFailedWithNilErrorIsAFailure(t *testing.T) {
	for _, retryable := range []bool{false, true} {
		o := Failed(nil, retryable)
		if o.Kind != KindFailed || o.Retryable != retryable || !errors.Is(o.Err, errNilFailure) {
			t.Errorf("Failed(nil, %v) = %+v, want a failure wrapping errNilFailure", retryable, o)
		}
	}
	if o := FailedAfter(nil, 0); o.Kind != KindFailed || !errors.Is(o.Err, errNilFailure) {
		t.Errorf("FailedAfter(nil, 0) = %+v, want a failure wrapping errNilFailure", o)
	}
}
