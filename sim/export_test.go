package sim

// Planted returns o with a deliberate defect planted in the world, for the external tests in
// this directory that drive sim/explain over failing runs: "ack-early" (enqueues acknowledged
// before their commit) "keep-dropped" (a handler kept running after its receipt dropped) or "panic" (the
// simulator itself panics).
func Planted(o Options, defect string) Options {
	switch defect {
	case "ack-early":
		o.mutation = mutAckEarly
	case "keep-dropped":
		o.mutation = mutKeepDropped
	case "panic":
		o.mutation = mutPanic
	default:
		panic("sim: no planted defect " + defect)
	}
	return o
}
