package lease

import (
	"testing"

	"github.com/sluicehq/sluice/internal/scenariotest"
)

// TestMain raises rapid's effort when SLUICE_LONG is set (the default run stays fast).
func TestMain(m *testing.M) { scenariotest.Main(m) }
