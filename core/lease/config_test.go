package lease

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestNewRefusesBadConfigNamingTheField: New returns an error (never panics) that wraps
// ErrConfig and names the field.
func TestNewRefusesBadConfigNamingTheField(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Pacing: []time.Duration{time.Second, 0}}, "Pacing"},
		{Config{Coalesce: -time.Second}, "Coalesce"},
		{Config{ReceiptsMax: -1}, "ReceiptsMax"},
	} {
		m, err := New(tc.cfg)
		if m != nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("New(%+v) = %v, %v; want ErrConfig naming %s", tc.cfg, m, err, tc.field)
		}
	}
	if _, err := New(Config{}); err != nil {
		t.Errorf("New(Config{}) = %v, want the defaults", err)
	}
}
