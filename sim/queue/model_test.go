package queue

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluicehq/sluice/core"
	"pgregory.net/rapid"
)

// model is the queue's semantics written plainly: a slice scanned and sorted on every receive.
type model struct {
	name    string
	lapsed  Lapsed
	stale   StaleDelete
	maxRecv int
	dlq     *model
	msgs    []*modelMsg
}

type modelMsg struct {
	id, body              string
	count                 int
	receipt               string
	receivedAt, visibleAt time.Time
	deleted, dead         bool
	issued                map[string]bool
}

func (m *model) send(now time.Time, id, body string, count int) {
	if id == "" {
		id = fmt.Sprintf("%s-%d", m.name, len(m.msgs)+1)
	}
	m.msgs = append(m.msgs, &modelMsg{id: id, body: body, count: count, visibleAt: now, issued: map[string]bool{}})
}

func (m *model) receive(now time.Time, max int, vis time.Duration) []core.Message {
	if vis == 0 {
		vis = 30 * time.Second
	}
	var cands []int
	for i, x := range m.msgs {
		if !x.deleted && !x.dead && !x.visibleAt.After(now) {
			cands = append(cands, i)
		}
	}
	sort.SliceStable(cands, func(a, b int) bool {
		return m.msgs[cands[a]].visibleAt.Before(m.msgs[cands[b]].visibleAt)
	})
	var out []core.Message
	for _, i := range cands {
		if len(out) == max {
			break
		}
		x := m.msgs[i]
		if m.maxRecv > 0 && x.count >= m.maxRecv {
			x.dead = true
			m.dlq.send(now, x.id, x.body, x.count)
			continue
		}
		x.count++
		x.receipt = fmt.Sprintf("%s/%d/%d", m.name, i+1, x.count)
		x.issued[x.receipt] = true
		x.receivedAt, x.visibleAt = now, now.Add(vis)
		out = append(out, core.Message{ID: x.id, Receipt: x.receipt, Body: []byte(x.body), ReceiveCount: x.count})
	}
	return out
}

func (m *model) find(receipt string) *modelMsg {
	for _, x := range m.msgs {
		if x.issued[receipt] {
			return x
		}
	}
	return nil
}

func (m *model) change(now time.Time, receipt string, t time.Duration) string {
	x := m.find(receipt)
	switch {
	case x == nil:
		return "gone/ReceiptHandleIsInvalid"
	case x.deleted || x.dead:
		return "gone/MessageNotInflight"
	case receipt != x.receipt:
		return "gone/ReceiptHandleIsInvalid"
	}
	if !x.visibleAt.After(now) {
		switch m.lapsed {
		case LapsedGone:
			return "gone/MessageNotInflight"
		case LapsedIgnore:
			return "ok"
		}
	}
	if now.Add(t).After(x.receivedAt.Add(12 * time.Hour)) {
		return "fatal/InvalidParameterValue"
	}
	x.visibleAt = now.Add(t)
	return "ok"
}

func (m *model) delete(receipt string) string {
	x := m.find(receipt)
	switch {
	case x == nil:
		return "gone/ReceiptHandleIsInvalid"
	case x.deleted && receipt == x.receipt:
		return "ok"
	case receipt != x.receipt || x.dead:
		if m.stale == StaleDeleteIgnored {
			return "ok"
		}
		return "gone/ReceiptHandleIsInvalid"
	}
	x.deleted = true
	return "ok"
}

func (m *model) states(now time.Time) []string {
	var out []string
	for _, x := range m.msgs {
		s := "visible"
		switch {
		case x.deleted:
			s = "deleted"
		case x.dead:
			s = "dead-lettered"
		case x.visibleAt.After(now):
			s = "in-flight"
		}
		out = append(out, fmt.Sprintf("%s %s count=%d", x.id, s, x.count))
	}
	return out
}

func queueStates(q *Queue, now time.Time) []string {
	var out []string
	for _, m := range q.Status(now).Messages {
		out = append(out, fmt.Sprintf("%s %s count=%d", m.ID, m.State, m.ReceiveCount))
	}
	return out
}

func TestQueueMatchesPlainModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		lapsed := Lapsed(rapid.IntRange(0, 2).Draw(t, "lapsed"))
		stale := StaleDelete(rapid.IntRange(0, 1).Draw(t, "staleDelete"))
		maxRecv := rapid.IntRange(0, 3).Draw(t, "maxReceiveCount")
		dm := &model{name: "dlq", lapsed: lapsed, stale: stale}
		mm := &model{name: "q", lapsed: lapsed, stale: stale, maxRecv: maxRecv}
		var dlq *Queue
		if maxRecv > 0 {
			dlq = New(Config{Name: "dlq", Lapsed: lapsed, StaleDelete: stale}, nil)
			mm.dlq = dm
		}
		q := New(Config{Name: "q", Lapsed: lapsed, StaleDelete: stale, DeadLetter: dlq, MaxReceiveCount: maxRecv}, nil)
		now := Epoch
		var receipts []string
		refs := map[string]Ref{} // each receipt resolved when received, asked again at every check
		pick := func(t *rapid.T) string {
			if len(receipts) == 0 || rapid.IntRange(0, 9).Draw(t, "garbage") == 0 {
				return rapid.SampledFrom([]string{"junk", "q/1/1", "q/7/2", "dlq/1/5"}).Draw(t, "badReceipt")
			}
			return rapid.SampledFrom(receipts).Draw(t, "receipt")
		}
		t.Repeat(map[string]func(*rapid.T){
			"send": func(t *rapid.T) {
				body := rapid.StringMatching(`[a-z]{0,3}`).Draw(t, "body")
				mm.send(now, "", body, 0)
				q.Send(now, []byte(body))
			},
			"advance": func(t *rapid.T) {
				now = now.Add(time.Duration(rapid.IntRange(0, 90).Draw(t, "seconds")) * time.Second)
			},
			"receive": func(t *rapid.T) {
				max := rapid.IntRange(1, 10).Draw(t, "max")
				vis := time.Duration(rapid.IntRange(0, 60).Draw(t, "visibility")) * time.Second
				want := mm.receive(now, max, vis)
				got := q.Receive(now, max, vis)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("receive (-model +queue):\n%s", diff)
				}
				for _, m := range got {
					receipts = append(receipts, m.Receipt)
					ref, ok := q.Resolve(m.Receipt)
					if !ok {
						t.Fatalf("Resolve(%s) of a receipt just issued failed", m.Receipt)
					}
					refs[m.Receipt] = ref
				}
			},
			"receiveDeadLetter": func(t *rapid.T) {
				if dlq == nil {
					t.Skip("no dead-letter queue")
				}
				want := dm.receive(now, 10, time.Minute)
				got := dlq.Receive(now, 10, time.Minute)
				if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("dlq receive (-model +queue):\n%s", diff)
				}
			},
			"changeVisibility": func(t *rapid.T) {
				r := pick(t)
				timeout := time.Duration(rapid.IntRange(0, 13*3600).Draw(t, "timeout")) * time.Second
				if rapid.Bool().Draw(t, "short") {
					timeout %= 2 * time.Minute
				}
				want := mm.change(now, r, timeout)
				got := errSummary(q.ChangeVisibility(now, r, timeout))
				if want != got {
					t.Fatalf("change %s %v: model %s, queue %s", r, timeout, want, got)
				}
			},
			"delete": func(t *rapid.T) {
				r := pick(t)
				want := mm.delete(r)
				got := errSummary(q.Delete(now, r))
				if want != got {
					t.Fatalf("delete %s: model %s, queue %s", r, want, got)
				}
			},
			"": func(t *rapid.T) {
				if diff := cmp.Diff(mm.states(now), queueStates(q, now)); diff != "" {
					t.Fatalf("states (-model +queue):\n%s", diff)
				}
				if err := q.checkInvariants(); err != nil {
					t.Fatal(err)
				}
				for _, r := range receipts {
					if got, want := q.HiddenAtRef(now, refs[r]), q.HiddenAt(now, r); got != want {
						t.Fatalf("HiddenAtRef of %s = %v, HiddenAt %v", r, got, want)
					}
				}
				for _, r := range []string{"junk", "dlq/1/5", "q/01/1", "q/1/999999"} { // never issued
					if _, ok := q.Resolve(r); ok {
						t.Fatalf("Resolve(%s) succeeded", r)
					}
				}
				if dlq != nil {
					if diff := cmp.Diff(dm.states(now), queueStates(dlq, now)); diff != "" {
						t.Fatalf("dlq states (-model +queue):\n%s", diff)
					}
					if err := dlq.checkInvariants(); err != nil {
						t.Fatal(err)
					}
				}
				next, ok := q.NextVisibleAt()
				var wantNext time.Time
				for _, x := range mm.msgs {
					if !x.deleted && !x.dead && (wantNext.IsZero() || x.visibleAt.Before(wantNext)) {
						wantNext = x.visibleAt
					}
				}
				if ok != !wantNext.IsZero() || !next.Equal(wantNext) {
					t.Fatalf("NextVisibleAt = %v, %v; model %v", next, ok, wantNext)
				}
			},
		})
	})
}
