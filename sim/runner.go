package sim

// runnerNode is one runner process (filled in when the runner engine lands).
type runnerNode struct{}

func (w *World) setupRunner()           {}
func (n *runnerNode) calm()             {}
func (n *runnerNode) settled() bool     { return true }
func (n *runnerNode) unsettled() string { return "" }
func (n *runnerNode) summarize()        {}
