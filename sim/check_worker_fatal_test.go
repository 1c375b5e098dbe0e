package sim

import "testing"

func init() { firedElsewhere[InvFatalEndsRun] = "TestFatalAsRetryIsCaught" }

// A worker that retries a fatal receive error instead of ending Run is caught by the bound on
// the exit that error must bring (the default profile draws the revoked permission).
func TestFatalAsRetryIsCaught(t *testing.T) {
	v, seed := runPlanted(t, "swarm", mutFatalAsRetry, 100)
	wantPlanted(t, v, seed, InvFatalEndsRun)
}
