package sim

import "github.com/sluicehq/sluice/sim/forge"

// The planted defect mutSplitFiring: an engine that journals the ScheduleFired records of a
// commit in a batch of their own, after the batch holding their jobs, and crashes between the
// two (the defect the one-batch rule of periodic jobs exists to prevent). The world plants it
// as the state such an engine leaves on disk: after a commit that handled a period, the
// node's journal is rewritten with the commit's batch minus its ScheduleFired frames (the
// first batch, durable), and the node crashes before the driver reads the commit's result.
// Production code carries no trace of it.

// splitFired rewrites node n's journal as the defective engine would have left it after its
// last commit, if that commit's batch holds ScheduleFired frames and other frames; it reports
// whether it did.
func (n *runnerNode) splitFired() bool {
	b, err := readAll(n.disk, journalName)
	if err != nil {
		return false
	}
	img, ok := forge.WithoutLastFired(b)
	if !ok {
		return false
	}
	return writeSynced(n.disk, journalName, img) == nil
}
