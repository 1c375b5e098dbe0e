// Package runner is the durable job runner: a pure state machine (Machine), a synchronous
// engine (Engine), the I/O layer that drives it over core/journal and the core.FS port, and
// its host (Node), the driver protocol. Every runner decision is made here (the production
// driver, the simulator and sluicetest only execute the Node's effects). The Machine has the
// one machine surface: New(MachineConfig) (*Machine, error), Step(Event), Ready() Ready (its
// ordering contract on the type), WakeAt() time.Time, Status() Status.
//
// Contract (numbered rules):
//
//  1. Every durable transition is one journal record (Enqueued, Started, Finished, Deferred,
//     Cancelled, Retried, Expired, Released, Snoozed, Snapshot; see record.go). Records and snapshots carry a
//     format byte (3); another format is refused whole with ErrFormat, naming what to do,
//     never misread. The machine applies a record to its
//     state through one function, apply, both live and in replay, so replaying the journal gives
//     exactly the live state after the last synced record.
//  2. An enqueue, cancel or retry is acknowledged, and an attempt dispatched, only after a Synced
//     event covers its record (Ready's ordering contract). So a job that crashes the process on
//     every attempt still has each Started record on disk and ends dead(spent) after Attempts.
//  3. Ids start at 1, are assigned in order and never reused once acknowledged: the snapshot
//     carries the next id. (The id of an enqueue lost with its unsynced batch, never
//     acknowledged, may be handed out again after the crash.)
//  4. Due jobs start, whenever a pool unit is free (continuous scheduling), highest priority
//     first, then (due, id); the starvation rule: a job due for AgeMax or longer starts before
//     any higher priority, the longest waiting first (so with a steady flood of higher
//     priorities a low one waits at most AgeMax plus one unit's turn). Three heaps with
//     per-job indices hold the waiting jobs (not yet due; due by priority; due by age). Admission follows retry.Admit: unit, late,
//     spent, breaker. A breaker refusal journals Deferred{due = until} and counts no attempt;
//     a half-open breaker with its probes taken defers to now+Cooldown (it cannot know when
//     the probes end); a probe's success that closes the breaker does not re-due them. Enqueue's
//     due must lie in UnixNano's range; a zero due is the enqueue's now. An enqueue whose
//     record would exceed RecordMax is refused (ErrTooLarge) before anything is appended: the
//     one size check. An empty target or options out of range are refused (ErrJob), a due
//     outside TimeRange too (ErrTime). A job's own options (Opts: priority, attempts,
//     deadline; kind and unique key carried for the runner's kinds) are journaled in its
//     Enqueued record; its attempts and deadline replace the policy's. EnqueueMany checks
//     every job first and refuses the batch at the first bad one; its records go to the
//     journal together (one batch, one sync) and one Ack lists their ids.
//     Unique keys: at most one non-terminal job per (kind, key) (Machine.unique), and after a
//     success with Opts.UniqueFor the key stays reserved for that long from the Finished
//     record's time (Machine.windows, carried by snapshots apart from the jobs; a compaction
//     leaves out the windows ended by the machine's time). An enqueue naming a held key
//     journals nothing and is answered with the holder's id (Ack.Duplicate) once everything
//     appended before it is durable; a Retry that would give a key a second holder is refused
//     (ErrDuplicate). Replay rebuilds the index and refuses a second holder.
//     Kinds: every job names its kind (Opts.Kind); each kind has its own queue. The next job to
//     start is picked among the kinds that may start one (registered, or any kind without
//     KindsOnly; below their KindConfig.Limit) in the order above, so a kind at its limit or
//     unregistered never holds back the others; its jobs wait, never started nor dropped.
//     Kinds are registered before the first dispatch (Register); with KindsOnly the machine
//     warns once per unregistered kind that has waiting jobs. Each kind's decode port
//     (KindConfig.Decode, else MachineConfig.Decode) makes the handler's value.
//     Pool.Acquire's answer decides admission.
//  5. Each attempt carries Token{id, attempt}; an outcome whose token is not the job's current
//     running attempt is ignored and logged. Its pool unit and breaker probe are still released.
//     A cancelled attempt not yet dispatched never starts; a dispatched one is cancelled by an
//     effect (Ready.Cancels, why ByUser) once the Cancelled record is durable, and its outcome
//     is ignored. A payload the decode-check port (MachineConfig.Decode) refuses is never
//     dispatched: the job is dead(permanent), and its breaker records nothing.
//  6. Outcomes: success → succeeded; a permanent failure → dead(permanent); a panic →
//     dead(panic); a retryable failure → waiting at now+retry.Wait, or dead(spent) when the
//     budget is used, or dead(late) when the retry would land at or past the deadline.
//  7. Open replays the journal, then records each job found running as a failed, retryable
//     `interrupted` attempt at now through the same policy (so it waits its backoff), and
//     syncs that before returning. Breakers are not persisted: they start closed.
//     A breaker that would decide as a new one (breaker.Idle) is forgotten, so memory holds
//     only targets that failed within the Window or are open or half-open.
//  8. Retry(id) of a dead job re-enqueues it at now with a fresh budget (attempts 0, first due
//     now); its last error and its attempt history are kept. The history (Job.History, the
//     last HistoryMax attempts) is built by apply from the times Started, Finished,
//     Released and Snoozed carry, so replay and snapshots give the same history as the live machine.
//  9. Compaction (Commit, when the journal grew past CompactBytes, or Compact) writes one
//     snapshot of the whole state minus all but the last Retention terminal jobs (by the order
//     they became terminal). Kept failure: error reported, old journal stands, engine goes on.
//     Lost failure: the engine is poisoned until reopened.
//  10. A failed journal write or sync poisons the engine: every later call returns ErrPoisoned
//     wrapping the first failure; nothing of the failed batch is acknowledged or started.
//  11. Graceful stop (Dispatch off): nothing is admitted; at stop+Grace every attempt still
//     running is cancelled (Ready.Cancels, why ByStop), and one that then ends other than in
//     success is released (a Released record): the job waits again at the due it started at,
//     its attempt count is unchanged, its breaker records no outcome. At stop+2·Grace those
//     still running are abandoned: Status().Stopped (and Result.Stopped) tells the driver to
//     Flush, optionally Compact, and Close; their Started records stand, so the next Open
//     counts them as interrupted. A crash (no stop) counts the attempt, per rule 7.
//     An attempt whose outcome is OutcomeSnoozed is given back the same way (a Snoozed
//     record), except that the job is due again at its end plus Outcome.After.
//  12. Periodic jobs (schedule.go): a schedule (SetSchedule, RemoveSchedule; at most
//     SchedulesMax) is journaled state; its spec ("@every D" or cron, UTC) is re-parsed at
//     replay. While dispatching, each Tick handles every due period, in name order, as one
//     batch: the job's Enqueued record, then ScheduleFired (the job, the next period after now).
//     A missed period (the next one is due too) gets one job (CatchUpOne) or none
//     (CatchUpSkip); a held unique key skips the period. WakeAt includes the next period.
//
// Hosting the engine: Node (node.go) is the one protocol every driver executes (the
// production owner, the simulator, sluicetest), raft's RawNode for this engine. A driver
// steps inputs and performs effects, and decides nothing:
//
//	e, err := runner.Open(fsys, "jobs.journal", cfg, now)
//	n := runner.NewNode(e, runner.NodeConfig{})
//	n.Step(runner.Admit{On: true})                    // Run or Drain
//	loop:
//	    for n.HasReady() { rd := n.Ready(); perform rd in its fields' order; n.Advance() }
//	    wait for one input; n.Step(runner.Clock{Now: now}); step it, and what else waits
//	    while n.Room() > 0: Propose{Ref, Enqueue/EnqueueMany/Cancel/Retry/SetSchedule/
//	    RemoveSchedule}, RegisterKind, Read, Wait, Ended{token, outcome}, Admit, Close,
//	    SyncDone{err} (the result of syncing rd.Sync, on any goroutine)
//	crash: drop n and e without Close; reopen with Open on the same FS.
//
// The Engine keeps the journal's half of the pipelined commit, unexported: begin writes a
// batch, Batch.Sync syncs it, finish takes its result; stageHeld frames records during a
// flight. Commit and Flush (the three in one call) serve tools and tests that drive the engine
// alone, without a Node.
//
// Invariants (checkInvariants): ids < next id; the queue holds exactly the waiting jobs, each
// in the not-yet-due heap or in both due heaps, every heap in order; units used = attempts in flight ≤ Capacity; a running job's current token holds a
// unit; terminal ⇔ terminal sequence > 0; dead ⇔ a reason; deferred ⇒ waiting; nothing waits
// for a record already synced; every breaker's own invariants; each schedule's next period
// after its last (checkSchedules).
package runner
