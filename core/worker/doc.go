// Package worker is the queue worker of docs/worker.md: it receives batches of messages, runs a
// handler per message under the lease that package lease keeps, and gives each delivery its
// disposition. Machine has the machine surface of package core (New, Step, Ready, WakeAt,
// Status): every transport call (receive, change visibility, delete), every handler start or
// cancel and every shutdown decision leaves as an effect in Ready, and every reply comes back
// as an event stamped with the time it arrived (Now), so it never blocks. Node hosts the
// Machine with the protocol its executors follow (Step, Ready, Perform in a written order,
// Advance, which says when to wake and when Run ends): package sluice's goroutines, the
// simulator's event loop and sluicetest execute the same Node and decide nothing.
//
// Rules:
//
//  1. Receive loop: while not shutting down, one Receive (at most BatchMax ≤ 10 messages,
//     long poll Wait, visibility Window) is in flight whenever fewer than
//     Concurrency+Prefetch deliveries are waiting or running; Max is the room left. Its stamp
//     t0 is the machine's time when the effect was produced, before the call is issued, so
//     Wait is at most two thirds of Window (default min(20 s, 2W/3)): a message delivered
//     late in a longer poll would arrive with its lease spent and be dropped every time. After
//     a receive that returned nothing the next waits until IdleDelay (1 s) after it was
//     issued, so a short poll on an empty queue does not spin. A
//     failed receive is retried after ReceiveBackoff (200 ms, 500 ms, 1 s, 2 s, 5 s, ...),
//     logged at Warn. A fatal receive error (the queue does not exist, access denied) ends
//     the worker: logged at Error, it starts the shutdown of rule 7, and Status.Err holds it.
//     A receive that returns more than Max: the extra deliveries are leased and released at
//     once like any disposition (Status.ReleasedExtra). A batch reply with the wrong number
//     of entries is a retryable failure of each entry (Status.BadReplies).
//  2. Each received delivery is leased (package lease) from t0. In order: an undecodable
//     delivery (Config.Decode fails) is poison: counted, logged with its message id, and acked
//     once ReceiveCount ≥ budget, else abandoned (no call; it reappears when its window
//     lapses). A delivery with ReceiveCount ≥ max(2, budget) is retired: acked without
//     running, logged at Error. Otherwise it waits for a handler slot.
//  3. Budget defaults to 5; with a redrive policy capturing at N (RedriveMaxReceives) the
//     effective budget is max(Budget, N+1), so the queue dead-letters before we retire.
//  4. At most Concurrency handlers run at once (a cancelled handler holds its slot until it
//     returns); waiting deliveries start in order of receipt.
//  5. Dispositions (docs/worker.md): Success → ack (Delete, batched); Permanent → ack and log at
//     Error, or a terminal backoff when the queue has a redrive policy; Retryable → release
//     after retry.Policy.Wait(ReceiveCount−1, r, Result.After) (Delay when Config.Rand is nil
//     and no After was given; 0 releases at once); Terminal → ChangeVisibility(300 s). A
//     disposition call failing retryably is retried by the lease machine within the lease;
//     one that still fails is logged at Warn and ends the lease.
//  6. A dropped lease cancels its running handler (CancelHandler) or skips a waiting one; the
//     result of a cancelled handler is ignored and gets no disposition. A lease ending on
//     time is dropped at its stop point, StopMargin (default min(1 s, W/20), validated here,
//     under W/10) before the local deadline: the queue's deadline is later still by the
//     receive's one-way latency, so a handler that stops within the margin never overlaps
//     the next consumer. Every lease call carries the deadline its context must end by.
//  7. Shutdown: no more receives; waiting deliveries are released at once (ChangeVisibility 0,
//     batched into as few calls as possible: one for up to 10; one whose renewal is in flight
//     follows when that renewal's reply arrives); running handlers keep their
//     leases renewed for Grace, after which (or as soon as none runs) the lease machine drops
//     every receipt without a disposition, cancelling the handlers and leaving their windows to
//     lapse. With StopHeld (the queue runner's) the handlers are cancelled first with their
//     leases held (CancelHandler.Held) and each result returned within a second Grace is
//     disposed (a release at once); only then are the remaining leases dropped. Handlers still running then (they ignore their cancellation) are waited for one
//     more Grace, then abandoned (Status.HandlersAbandoned). Messages from a receive still in
//     flight are released at once when it returns; once that receive is all that is left (no
//     lease held, waiting or being disposed) the machine abandons it (Ready.AbandonReceive:
//     the driver cancels its context) and still takes its ReceiveDone. Lease calls whose
//     receipts were all dropped are abandoned (Ready.AbandonCalls) and never waited for.
//     Status.Done reports when nothing is left: no delivery, no call in flight that names a
//     held receipt, no handler waited for.
//  8. Status.Heartbeat is the time of the last event processed: a liveness signal.
//  9. Ready takes the lease machine's effects (its one channel) once, so the calls of
//     dispositions decided in a burst of steps share batches; the drops it hands out then
//     cancel or forget their deliveries, and the decisions of every step run again (a drop
//     may free room). Between a Step and Ready a decision about a delivery asks the lease
//     machine whether it is still held.
//
// Invariants (checkInvariants, which hold after every Ready): the running and waiting counters match the deliveries;
// running ≤ Concurrency; every waiting or running delivery's lease is held and every
// cancelled one's is not; each waiting delivery is queued once; the count of lease calls
// not abandoned matches; the lease machine's own.
package worker
