package sim

// StopMarginKept: the worker cancelled the handler of receipt (its lease dropped for why,
// not because the queue said it was gone); hidden says whether the queue still hides the
// message for the stop margin from now. Given the latency bound, the queue's deadline is
// never before the local one, so a handler cancelled at the stop point that stops within the
// margin never overlaps the next consumer.
func (c *Checker) StopMarginKept(receipt, why string, hidden bool) {
	m := c.receipt(receipt)
	c.check(InvStopMargin, hidden, "handler of message %s (receipt %s, worker %d) cancelled (%s) at %s with less than the stop margin left at the queue",
		m.msg, receipt, m.worker, why, Offset(c.now))
}
