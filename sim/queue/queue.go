package queue

import (
	"container/heap"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/core"
)

// Epoch is the simulator's fixed origin; Describe prints times as offsets from Config.Epoch,
// which defaults to it.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// VisibilityCeiling is how long after a delivery's first receipt its message may stay hidden
// (SQS: 12 hours).
const VisibilityCeiling = 12 * time.Hour

// Lapsed says how ChangeVisibility answers a current receipt whose window already lapsed but
// whose message was not yet redelivered (rule 6 of the package doc).
type Lapsed uint8

const (
	// LapsedGone answers Gone MessageNotInflight.
	LapsedGone Lapsed = iota
	// LapsedIgnore answers success and changes nothing, as SQS may.
	LapsedIgnore
	// LapsedExtend answers success and hides the message again.
	LapsedExtend
	// LapsedMixed draws one of the three above from the rng per call.
	LapsedMixed
)

func (l Lapsed) String() string {
	switch l {
	case LapsedGone:
		return "gone"
	case LapsedIgnore:
		return "ignore"
	case LapsedExtend:
		return "extend"
	case LapsedMixed:
		return "mixed"
	}
	return fmt.Sprintf("Lapsed(%d)", uint8(l))
}

// StaleDelete says how Delete answers a stale receipt (one from before a redelivery).
type StaleDelete uint8

const (
	// StaleDeleteGone answers Gone ReceiptHandleIsInvalid.
	StaleDeleteGone StaleDelete = iota
	// StaleDeleteIgnored answers success and leaves the message alone, as AWS documents.
	StaleDeleteIgnored
)

// Error codes the queue answers with (the SQS codes, without the AWS.SimpleQueueService. prefix).
const (
	CodeReceiptHandleIsInvalid = "ReceiptHandleIsInvalid"
	CodeMessageNotInflight     = "MessageNotInflight"
	CodeInvalidParameterValue  = "InvalidParameterValue"
)

// Config configures a Queue. The zero value is usable: name "q", 30 s default visibility, no
// dead-letter queue, lapsed extensions answered Gone, stale deletes answered Gone.
type Config struct {
	Name              string        // used in ids and receipts; must not contain '/'
	VisibilityDefault time.Duration // receive visibility when the caller passes 0; default 30 s
	DeadLetter        *Queue        // redrive target; nil for none
	MaxReceiveCount   int           // redrive at this many receives; needs DeadLetter
	Lapsed            Lapsed
	StaleDelete       StaleDelete
	Epoch             time.Time // origin for Describe; default Epoch
}

// Queue is the simulated SQS queue. See the package doc for its rules.
type Queue struct {
	cfg Config
	rng *rand.Rand

	// msgs holds every message ever stored, by seq-1.
	msgs []*message
	// live holds the messages that are neither deleted nor dead-lettered.
	// Invariant: a heap ordered by (visibleAt, seq); m.index is its position, -1 when absent.
	live msgHeap

	deleted, dead int
}

type message struct {
	seq        int
	id         string
	body       []byte
	attrs      map[string]string         // String attributes as sent; nil for none
	typed      map[string]core.Attribute // attributes sent with their own type; nil for none
	sentAt     time.Time
	count      int       // deliveries so far (ApproximateReceiveCount)
	receipt    string    // receipt of the latest delivery; "" before the first
	receivedAt time.Time // first receipt of the latest delivery; ceiling base
	visibleAt  time.Time // Invariant: receivedAt <= visibleAt <= receivedAt + ceiling once received
	deleted    bool
	dead       bool // moved to the dead-letter queue
	index      int  // position in the live heap, -1 when not live
	// checked is the receipt, seq and count checkInvariants last found consistent: the check
	// is a function of the three alone, and most messages' stay the same between checks; and
	// likewise the times it last found within their bounds.
	checked struct {
		receipt    string
		seq, count int
		// times: the times (and branch) last found within their bounds, when ok.
		times struct {
			ok, unreceived          bool
			sent, received, visible time.Time
		}
	}
}

// New returns an empty queue. rng may be nil unless cfg.Lapsed is LapsedMixed.
func New(cfg Config, rng *rand.Rand) *Queue {
	if cfg.Name == "" {
		cfg.Name = "q"
	}
	if strings.Contains(cfg.Name, "/") {
		panic(fmt.Sprintf("queue: name %q contains '/'", cfg.Name))
	}
	if cfg.VisibilityDefault == 0 {
		cfg.VisibilityDefault = 30 * time.Second
	}
	if cfg.VisibilityDefault < 0 || cfg.VisibilityDefault > VisibilityCeiling {
		panic(fmt.Sprintf("queue: default visibility %v outside 0..12h", cfg.VisibilityDefault))
	}
	if cfg.MaxReceiveCount < 0 || (cfg.MaxReceiveCount > 0) != (cfg.DeadLetter != nil) {
		panic("queue: MaxReceiveCount > 0 and DeadLetter go together")
	}
	if cfg.DeadLetter != nil && cfg.DeadLetter.cfg.Name == cfg.Name {
		panic(fmt.Sprintf("queue: dead-letter queue has the same name %q", cfg.Name))
	}
	if cfg.Lapsed > LapsedMixed {
		panic(fmt.Sprintf("queue: unknown lapse mode %d", cfg.Lapsed))
	}
	if cfg.Lapsed == LapsedMixed && rng == nil {
		panic("queue: LapsedMixed needs an rng")
	}
	if cfg.Epoch.IsZero() {
		cfg.Epoch = Epoch
	}
	return &Queue{cfg: cfg, rng: rng}
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.cfg.Name }

// DeadLetter is the redrive target, nil without one.
func (q *Queue) DeadLetter() *Queue { return q.cfg.DeadLetter }

// Send stores body (copied) and returns the new message's id.
func (q *Queue) Send(now time.Time, body []byte) string {
	return q.store(now, "", body, 0).id
}

func (q *Queue) store(now time.Time, id string, body []byte, count int) *message {
	seq := len(q.msgs) + 1
	if id == "" {
		id = q.cfg.Name + "-" + strconv.Itoa(seq)
	}
	m := &message{
		seq: seq, id: id, body: append([]byte(nil), body...), sentAt: now,
		count: count, visibleAt: now, index: -1,
	}
	q.msgs = append(q.msgs, m)
	heap.Push(&q.live, m)
	return m
}

// Receive delivers up to max messages visible at now, hiding each for visibility (the
// default when 0). It moves messages past MaxReceiveCount to the dead-letter queue.
func (q *Queue) Receive(now time.Time, max int, visibility time.Duration) []core.Message {
	if max < 1 || max > core.BatchMax {
		panic(fmt.Sprintf("queue: receive max %d outside 1..%d", max, core.BatchMax))
	}
	if visibility < 0 || visibility > VisibilityCeiling {
		panic(fmt.Sprintf("queue: receive visibility %v outside 0..12h", visibility))
	}
	if visibility == 0 {
		visibility = q.cfg.VisibilityDefault
	}
	visibility = visibility.Truncate(time.Second)
	var out []core.Message
	for len(out) < max && q.live.Len() > 0 && !q.live[0].visibleAt.After(now) {
		m := q.live[0]
		if q.cfg.MaxReceiveCount > 0 && m.count >= q.cfg.MaxReceiveCount {
			heap.Remove(&q.live, 0)
			m.dead = true
			q.dead++
			dm := q.cfg.DeadLetter.store(now, m.id, m.body, m.count)
			dm.attrs, dm.typed = m.attrs, m.typed
			continue
		}
		m.count++
		m.receipt = q.receiptOf(m)
		m.receivedAt = now
		m.visibleAt = now.Add(visibility)
		heap.Fix(&q.live, 0)
		out = append(out, core.Message{
			ID: m.id, Receipt: m.receipt, Body: append([]byte(nil), m.body...), ReceiveCount: m.count,
			Attributes: copyAttrs(m.attrs), Typed: typedOf(m),
		})
	}
	return out
}

// NextVisibleAt is the earliest time a live message is (or becomes) visible; false when the
// queue holds no live message. A waiting long poll can be answered at max(now, it).
func (q *Queue) NextVisibleAt() (time.Time, bool) {
	if q.live.Len() == 0 {
		return time.Time{}, false
	}
	return q.live[0].visibleAt, true
}

func (q *Queue) receiptOf(m *message) string {
	return q.cfg.Name + "/" + strconv.Itoa(m.seq) + "/" + strconv.Itoa(m.count)
}

// lookup resolves a receipt to its message and whether it is the current one.
func (q *Queue) lookup(receipt string) (m *message, current bool, ok bool) {
	m, count, ok := q.resolve(receipt)
	return m, ok && count == m.count, ok
}

// resolve returns the message a receipt names and the receive count it names, if it was issued.
func (q *Queue) resolve(receipt string) (m *message, count int, ok bool) {
	rest, ok := cutName(receipt, q.cfg.Name)
	if !ok {
		return nil, 0, false
	}
	// receipt is Name/seq/count by construction; canonical digits make it the one issued.
	seq, n := leadingInt(rest)
	if n == 0 || n == len(rest) || rest[n] != '/' {
		return nil, 0, false
	}
	count, k := leadingInt(rest[n+1:])
	if k == 0 || n+1+k != len(rest) || seq > len(q.msgs) {
		return nil, 0, false
	}
	m = q.msgs[seq-1]
	if count > m.count {
		return nil, 0, false // a receipt never issued
	}
	return m, count, true
}

// leadingInt parses the positive integer s begins with, in canonical form (as strconv.Itoa
// writes it: no sign, no leading zero), and returns it and its length in bytes; 0, 0 when s
// does not begin with one or it has more than 18 digits (no receipt names one that large).
func leadingInt(s string) (v, n int) {
	if s == "" || s[0] < '1' || s[0] > '9' {
		return 0, 0
	}
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		if n == 18 {
			return 0, 0
		}
		v = v*10 + int(s[n]-'0')
		n++
	}
	return v, n
}

// cutName cuts "name/" off the front of receipt (without building "name/": lookup runs after
// every step).
func cutName(receipt, name string) (string, bool) {
	rest, ok := strings.CutPrefix(receipt, name)
	if !ok || rest == "" || rest[0] != '/' {
		return "", false
	}
	return rest[1:], true
}

// isReceiptOf reports whether r == q.receiptOf(m), without building it (the invariants compare
// every message's receipt).
func (q *Queue) isReceiptOf(m *message, r string) bool {
	rest, ok := cutName(r, q.cfg.Name)
	if !ok {
		return false
	}
	seqs, counts, ok := strings.Cut(rest, "/")
	return ok && isItoa(seqs, m.seq) && isItoa(counts, m.count)
}

// isItoa reports whether s == strconv.Itoa(n).
func isItoa(s string, n int) bool {
	if n <= 0 || len(s) > 18 {
		return s == strconv.Itoa(n)
	}
	if !canonical(s) {
		return false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		v = v*10 + int(s[i]-'0')
	}
	return v == n
}

// canonical reports that s is how strconv.Itoa writes a positive integer: digits only, no
// sign, no leading zero (checked without building that string: lookup runs after every step).
func canonical(s string) bool {
	if s == "" || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func transportErr(op string, class core.Class, code, format string, args ...any) error {
	return &core.TransportError{Class: class, Op: op, Code: code, Err: fmt.Errorf(format, args...)}
}

// ChangeVisibility hides the receipt's message until now + timeout (rules 4-6).
func (q *Queue) ChangeVisibility(now time.Time, receipt string, timeout time.Duration) error {
	const op = "change-visibility"
	m, current, ok := q.lookup(receipt)
	switch {
	case !ok:
		return transportErr(op, core.Gone, CodeReceiptHandleIsInvalid, "queue %s: receipt %q is invalid", q.cfg.Name, receipt)
	case m.deleted || m.dead:
		return transportErr(op, core.Gone, CodeMessageNotInflight, "queue %s: message %s is not in flight", q.cfg.Name, m.id)
	case !current:
		return transportErr(op, core.Gone, CodeReceiptHandleIsInvalid, "queue %s: receipt %q is stale (message %s was redelivered)", q.cfg.Name, receipt, m.id)
	}
	timeout = timeout.Truncate(time.Second)
	if timeout < 0 {
		return transportErr(op, core.Fatal, CodeInvalidParameterValue, "queue %s: visibility timeout %v is negative", q.cfg.Name, timeout)
	}
	if !m.visibleAt.After(now) { // lapsed, not redelivered
		mode := q.cfg.Lapsed
		if mode == LapsedMixed {
			mode = Lapsed(q.rng.Intn(3))
		}
		switch mode {
		case LapsedGone:
			return transportErr(op, core.Gone, CodeMessageNotInflight, "queue %s: message %s is not in flight (its window lapsed)", q.cfg.Name, m.id)
		case LapsedIgnore:
			return nil
		}
	}
	deadline := now.Add(timeout)
	if ceiling := m.receivedAt.Add(VisibilityCeiling); deadline.After(ceiling) {
		return transportErr(op, core.Fatal, CodeInvalidParameterValue,
			"queue %s: visibility timeout %v for message %s would pass the 12h ceiling by %v",
			q.cfg.Name, timeout, m.id, deadline.Sub(ceiling))
	}
	m.visibleAt = deadline
	heap.Fix(&q.live, m.index)
	return nil
}

// Delete deletes the receipt's message (rules 4 and 6).
func (q *Queue) Delete(now time.Time, receipt string) error {
	const op = "delete"
	m, current, ok := q.lookup(receipt)
	switch {
	case !ok:
		return transportErr(op, core.Gone, CodeReceiptHandleIsInvalid, "queue %s: receipt %q is invalid", q.cfg.Name, receipt)
	case m.deleted && current:
		return nil
	case !current || m.dead:
		if q.cfg.StaleDelete == StaleDeleteIgnored {
			return nil
		}
		return transportErr(op, core.Gone, CodeReceiptHandleIsInvalid, "queue %s: receipt %q is stale (message %s was redelivered or moved)", q.cfg.Name, receipt, m.id)
	}
	heap.Remove(&q.live, m.index)
	m.deleted = true
	q.deleted++
	return nil
}

// ChangeVisibilityBatch applies each entry as ChangeVisibility would, in order.
func (q *Queue) ChangeVisibilityBatch(now time.Time, entries []core.VisibilityChange) []error {
	checkBatch(len(entries))
	errs := make([]error, len(entries))
	for i, e := range entries {
		errs[i] = q.ChangeVisibility(now, e.Receipt, e.Timeout)
	}
	return errs
}

// DeleteBatch applies each entry as Delete would, in order.
func (q *Queue) DeleteBatch(now time.Time, receipts []string) []error {
	checkBatch(len(receipts))
	errs := make([]error, len(receipts))
	for i, r := range receipts {
		errs[i] = q.Delete(now, r)
	}
	return errs
}

func checkBatch(n int) {
	if n < 1 || n > core.BatchMax {
		panic(fmt.Sprintf("queue: batch of %d entries outside 1..%d", n, core.BatchMax))
	}
}

// msgHeap orders live messages by (visibleAt, seq).
type msgHeap []*message

func (h msgHeap) Len() int { return len(h) }
func (h msgHeap) Less(i, j int) bool {
	if !h[i].visibleAt.Equal(h[j].visibleAt) {
		return h[i].visibleAt.Before(h[j].visibleAt)
	}
	return h[i].seq < h[j].seq
}
func (h msgHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *msgHeap) Push(x any) {
	m := x.(*message)
	m.index = len(*h)
	*h = append(*h, m)
}
func (h *msgHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.index = -1
	return m
}
