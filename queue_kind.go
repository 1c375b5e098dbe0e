package sluice

import (
	"context"
	"fmt"

	"github.com/sluicehq/sluice/core/runner"
)

// The Runner methods a Kind reaches, answered for a kind registered on a QueueRunner (whose
// embedded Runner is nil): Run and Stats go to the QueueRunner, the rest are refused with
// ErrQueueUnsupported.

// queue is the QueueRunner of a queue-backed kind; nil otherwise, and for a nil Kind.
func (k *Kind[A]) queue() *QueueRunner {
	if k == nil {
		return nil
	}
	return k.q
}

// runner is the embedded Runner; nil for a nil Kind, whose calls then refuse as a zero
// Runner's do.
func (k *Kind[A]) runner() *Runner {
	if k == nil {
		return nil
	}
	return k.Runner
}

// Breakers is Runner.Breakers; a queue-backed kind's breakers live in each process's
// worker, out of the handle's sight (ErrQueueUnsupported).
func (k *Kind[A]) Breakers(ctx context.Context) ([]BreakerInfo, error) {
	if k.queue() != nil {
		return nil, fmt.Errorf("%w: breakers: each process's worker keeps its own; read them from its logs and hooks", ErrQueueUnsupported)
	}
	return k.runner().Breakers(ctx)
}

// enqueueQueue is EnqueueMany on a queue: the ids are the jobs' own, drawn at random by this
// process (see docs/queue.md).
func (k *Kind[A]) enqueueQueue(ctx context.Context, jobs []NewJob[A]) ([]uint64, error) {
	qj := make([]queueJob, len(jobs))
	for i, j := range jobs {
		b, err := k.codec.Encode(j.Payload)
		if err != nil {
			return nil, wrapf(nil, err, "enqueue many: job %d", i)
		}
		qj[i] = queueJob{due: j.Due, target: j.Target, payload: b, opts: k.keyed(j.Payload, j.Options)}
	}
	return k.q.enqueue(ctx, k.name, qj)
}

// Run is Runner.Run, or QueueRunner.Run for a kind registered on one.
func (k *Kind[A]) Run(ctx context.Context) error {
	if k.queue() != nil {
		return k.q.Run(ctx)
	}
	return k.runner().Run(ctx)
}

// Cancel is Runner.Cancel; a queue cannot cancel a message it holds (ErrQueueUnsupported).
func (k *Kind[A]) Cancel(ctx context.Context, id uint64) error {
	if k.queue() != nil {
		return fmt.Errorf("%w: cancel %d: a queue cannot withdraw a sent message; have the handler skip it", ErrQueueUnsupported, id)
	}
	return k.runner().Cancel(ctx, id)
}

// Retry is Runner.Retry; on a queue, redrive the dead-letter queue instead (ErrQueueUnsupported).
func (k *Kind[A]) Retry(ctx context.Context, id uint64) error {
	if k.queue() != nil {
		return fmt.Errorf("%w: retry %d: redrive the dead-letter queue to run dead jobs again", ErrQueueUnsupported, id)
	}
	return k.runner().Retry(ctx, id)
}

// Drain is Runner.Drain; a queue has no end to wait for (ErrQueueUnsupported).
func (k *Kind[A]) Drain(ctx context.Context) error {
	if k.queue() != nil {
		return fmt.Errorf("%w: drain: a queue shared by a fleet is never known to be idle; use Run", ErrQueueUnsupported)
	}
	return k.runner().Drain(ctx)
}

// Close is Runner.Close; a QueueRunner holds nothing to close (Run's end stops it).
func (k *Kind[A]) Close() error {
	if k.queue() != nil {
		return nil
	}
	return k.runner().Close()
}

// DrainDue is Runner.DrainDue; refused on a queue as Drain is.
func (k *Kind[A]) DrainDue(ctx context.Context) error {
	if k.queue() != nil {
		return fmt.Errorf("%w: drain: a queue shared by a fleet is never known to be idle; use Run", ErrQueueUnsupported)
	}
	return k.runner().DrainDue(ctx)
}

// Stats is Runner.Stats; a queue holds no per-kind counts by state (ErrQueueUnsupported:
// QueueRunner.Stats counts this process's work).
func (k *Kind[A]) Stats(ctx context.Context) (Stats, error) {
	if k.queue() != nil {
		return Stats{}, fmt.Errorf("%w: stats: a queue keeps no counts by state; use QueueRunner.Stats for this process's work", ErrQueueUnsupported)
	}
	return k.runner().Stats(ctx)
}

// Unschedule is Runner.Unschedule; a queue-backed kind has no schedules (ErrQueueUnsupported).
func (k *Kind[A]) Unschedule(ctx context.Context, name string) error {
	if k.queue() != nil {
		return fmt.Errorf("%w: unschedule %s: a queue-backed kind has no schedules", ErrQueueUnsupported, runner.QuoteCut(name))
	}
	return k.runner().Unschedule(ctx, name)
}

// Schedules is Runner.Schedules; a queue-backed kind has none (ErrQueueUnsupported).
func (k *Kind[A]) Schedules(ctx context.Context) ([]ScheduleInfo, error) {
	if k.queue() != nil {
		return nil, fmt.Errorf("%w: a queue-backed kind has no schedules", ErrQueueUnsupported)
	}
	return k.runner().Schedules(ctx)
}
