package faults

import (
	"fmt"
	"math/rand"
	"time"
)

// Call is the outcome the network decides for one transport call.
type Call int

const (
	// CallOK: the call reaches the queue, takes effect, and its reply comes back.
	CallOK Call = iota
	// CallFailBefore: the call fails before taking effect (connection refused, a timeout on
	// the way out). Retryable.
	CallFailBefore
	// CallFailAfter: the call takes effect at the queue but the caller sees a failure (the
	// reply was lost or timed out). Retryable; the caller cannot tell it from CallFailBefore.
	CallFailAfter
	// CallThrottle: the queue refuses the call without effect (ThrottlingException). Retryable.
	CallThrottle
	// CallServerError: a 5xx without effect. Retryable.
	CallServerError
	// CallStale: the queue answers that the receipt is invalid, without effect (gone).
	CallStale
	// CallFatal: authorisation or a malformed request, without effect (fatal).
	CallFatal
)

var callNames = [...]string{"ok", "fail-before", "fail-after", "throttle", "server-error", "stale", "fatal"}

func (c Call) String() string {
	if int(c) >= 0 && int(c) < len(callNames) {
		return callNames[c]
	}
	return fmt.Sprintf("Call(%d)", int(c))
}

// Transport is the network and queue-side fault model, per transport call.
type Transport struct {
	FailBefore  float64 // P(call fails before taking effect)
	FailAfter   float64 // P(call takes effect but reports failure)
	Throttle    float64 // P(throttled)
	ServerError float64 // P(5xx)
	Stale       float64 // P(a receipt-naming call is answered gone without effect)
	Fatal       float64 // P(a fatal error); drops the receipt
	// Breach: P(the queue or its client library breaks the Transport contract on a call,
	// drawn by the world from its own stream): a receive returns more messages than asked
	// for, a batch reply carries the wrong number of entries, or a call fails with an error
	// that is no *core.TransportError (which the worker must treat as retryable).
	Breach float64

	// Latency of a call, each way: drawn uniformly in [LatencyMin, LatencyMax]; with
	// probability Spike it is instead drawn in [SpikeMin, SpikeMax] (beyond the lease margin).
	LatencyMin, LatencyMax time.Duration
	Spike                  float64
	SpikeMin, SpikeMax     time.Duration
}

// On reports whether the model injects any fault (latency alone is not a fault).
func (t Transport) On() bool {
	return t.FailBefore+t.FailAfter+t.Throttle+t.ServerError+t.Stale+t.Fatal+t.Spike > 0
}

// Draw decides the outcome of one call. It consumes exactly one value of r. namesReceipt says
// whether the call names a receipt (only those can be answered stale).
func (t Transport) Draw(r *rand.Rand, namesReceipt bool) Call {
	u := r.Float64()
	for _, c := range [...]struct {
		p    float64
		call Call
	}{
		{t.FailBefore, CallFailBefore},
		{t.FailAfter, CallFailAfter},
		{t.Throttle, CallThrottle},
		{t.ServerError, CallServerError},
		{t.Stale, CallStale},
		{t.Fatal, CallFatal},
	} {
		if u < c.p {
			if c.call == CallStale && !namesReceipt {
				return CallFailBefore
			}
			return c.call
		}
		u -= c.p
	}
	return CallOK
}

// Breaches of the Transport contract (Transport.Breach).
const (
	BreachNone      = iota
	BreachExtra     // a receive returns more messages than asked for
	BreachCount     // a batch reply carries one entry too many or too few
	BreachUnclassed // the call fails, without effect, with an error that is no *core.TransportError
)

// DrawBreach decides whether one call breaks the contract and how; it consumes exactly two
// values of r. A receive cannot get a wrong entry count and a batch call no extra messages:
// those draws come out as BreachUnclassed.
func (t Transport) DrawBreach(r *rand.Rand, receive bool) int {
	u, k := r.Float64(), 1+r.Intn(3)
	switch {
	case u >= t.Breach:
		return BreachNone
	case k == BreachExtra && receive, k == BreachCount && !receive:
		return k
	}
	return BreachUnclassed
}

// Latency draws one leg's latency. It consumes exactly two values of r. spiked reports a draw
// from the spike range.
func (t Transport) Latency(r *rand.Rand) (d time.Duration, spiked bool) {
	u, v := r.Float64(), r.Float64()
	if u < t.Spike {
		return between(v, t.SpikeMin, t.SpikeMax), true
	}
	return between(v, t.LatencyMin, t.LatencyMax), false
}

// LatencyBound is the most a call can take both ways without a spike: the bound under which
// the lease controller promises a handled message stays hidden (docs/simulator.md, hidden-while-working).
func (t Transport) LatencyBound() time.Duration { return 2 * t.LatencyMax }

// Validate reports the first probability or range out of bounds.
func (t Transport) Validate() error {
	sum := 0.0
	for _, p := range []struct {
		name string
		v    float64
	}{{"FailBefore", t.FailBefore}, {"FailAfter", t.FailAfter}, {"Throttle", t.Throttle},
		{"ServerError", t.ServerError}, {"Stale", t.Stale}, {"Fatal", t.Fatal}, {"Spike", t.Spike},
		{"Breach", t.Breach}} {
		if err := checkP("transport", p.name, p.v); err != nil {
			return err
		}
		if p.name != "Spike" && p.name != "Breach" {
			sum += p.v
		}
	}
	if sum > 1 {
		return fmt.Errorf("faults: transport: call fault probabilities sum to %v > 1", sum)
	}
	if err := checkRange("transport latency", t.LatencyMin, t.LatencyMax); err != nil {
		return err
	}
	return checkRange("transport spike", t.SpikeMin, t.SpikeMax)
}

// between maps u in [0,1) to [lo, hi] in whole milliseconds (deterministic, no float output).
func between(u float64, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	span := int64((hi - lo) / time.Millisecond)
	return lo + time.Duration(int64(u*float64(span+1)))*time.Millisecond
}

func checkP(model, name string, p float64) error {
	if !(p >= 0 && p <= 1) {
		return fmt.Errorf("faults: %s: %s = %v is not a probability", model, name, p)
	}
	return nil
}

func checkRange(name string, lo, hi time.Duration) error {
	if lo < 0 || hi < lo {
		return fmt.Errorf("faults: %s: range [%v, %v] is invalid", name, lo, hi)
	}
	return nil
}
