package sim

import "testing"

func init() { firedElsewhere[InvFatalEndsRun] = "TestFatalAsRetryIsCaught" }

// A worker that retries a fatal receive error instead of ending Run is caught by the bound on
// the exit that error must bring (the default profile draws the revoked permission).
func TestFatalAsRetryIsCaught(t *testing.T) {
	v, seed := runPlanted(t, "swarm", mutFatalAsRetry, 100)
	wantPlanted(t, v, seed, InvFatalEndsRun)
}

// A renewal that leaves after its receipt's disposition began (the executor sends each
// renewal 50 ms late) is caught by lease-no-renew-after-disposition once the invariants that
// see the lateness itself first are muted.
func TestLateRenewalAfterDispositionIsCaught(t *testing.T) {
	v, seed := runPlanted(t, "swarm", mutLateRenewal, 300, InvRenewalOnTime, InvWakeAtNotLate, InvDispositionPrompt)
	wantPlanted(t, v, seed, InvLeaseNoRenewAfter)
}
