package queue

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// isReceiptOf(m, r) agrees with r == receiptOf(m) on issued receipts and on near misses.
func TestIsReceiptOfEqualsComparingTheBuiltReceipt(t *testing.T) {
	q := &Queue{cfg: Config{Name: "q"}}
	cands := []string{"", "q", "q/", "q/1", "q/1/", "/1/1", "qq/1/1", "q/01/1", "q/1/01", "q/+1/1",
		"q/1/1/", "q/1/1x", "q/0/1", "q/1/0", "q/-1/1", "q/10/1", "q/1/10", "q/99999999999999999999/1"}
	for seq := 0; seq <= 12; seq++ {
		for count := 0; count <= 12; count++ {
			m := &message{seq: seq, count: count}
			for _, r := range append(cands, q.receiptOf(m)) {
				if got, want := q.isReceiptOf(m, r), r == q.receiptOf(m); got != want {
					t.Errorf("seq %d count %d receipt %q: isReceiptOf %v, want %v", seq, count, r, got, want)
				}
			}
		}
	}
}

// spoiledAfterCheck sends one message (and receives it when received), checks the queue,
// spoils the message and reports whether the check still passes (it should not).
func spoiledAfterCheck(t *testing.T, received bool, spoil func(m *message)) bool {
	t.Helper()
	q := New(Config{}, nil)
	now := time.Unix(0, 0)
	q.Send(now, []byte("x"))
	if received {
		if got := q.Receive(now, 1, time.Minute); len(got) != 1 {
			t.Fatalf("received %d", len(got))
		}
	}
	if err := q.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	spoil(q.msgs[0])
	return q.CheckInvariants() == nil
}

// checkInvariants remembers a consistent receipt, but a change of the receipt, the count or
// the seq after it is still caught.
func TestReceiptCheckRemembersOnlyWhatItChecked(t *testing.T) {
	for _, spoil := range []func(m *message){
		func(m *message) { m.receipt = m.receipt + "0" },
		func(m *message) { m.count++ },
		func(m *message) { m.seq++ },
	} {
		if spoiledAfterCheck(t, true, spoil) {
			t.Fatal("a spoiled receipt passed")
		}
	}
}

// lookup agrees with parsing by strconv.Atoi (and the canonical-form check) on issued
// receipts, older ones and near misses.
func TestLookupParsesAsAtoiDoes(t *testing.T) {
	q := &Queue{cfg: Config{Name: "q"}}
	for seq := 1; seq <= 11; seq++ {
		q.msgs = append(q.msgs, &message{seq: seq, count: seq % 4})
	}
	old := func(receipt string) (*message, bool, bool) {
		rest, ok := cutName(receipt, q.cfg.Name)
		if !ok {
			return nil, false, false
		}
		seqs, counts, ok := strings.Cut(rest, "/")
		if !ok {
			return nil, false, false
		}
		seq, err1 := strconv.Atoi(seqs)
		count, err2 := strconv.Atoi(counts)
		if err1 != nil || err2 != nil || seq < 1 || seq > len(q.msgs) || count < 1 {
			return nil, false, false
		}
		m := q.msgs[seq-1]
		if count > m.count || !canonical(seqs) || !canonical(counts) {
			return nil, false, false
		}
		return m, count == m.count, true
	}
	cands := []string{"", "q", "q/", "q/1", "q/1/", "/1/1", "qq/1/1", "q/01/1", "q/1/01", "q/+1/1", "q/1/+1",
		"q/1/1/", "q/1/1x", "q/0/1", "q/1/0", "q/-1/1", "q/1/-1", "q/1//1", "q//1", "q/99999999999999999999/1",
		"q/1/99999999999999999999", "q/1/999999999999999999", "q/3/3/3", "q/ 1/1", "q/1/1 "}
	for seq := 0; seq <= 13; seq++ {
		for count := 0; count <= 5; count++ {
			cands = append(cands, "q/"+strconv.Itoa(seq)+"/"+strconv.Itoa(count))
		}
	}
	found := 0
	for _, r := range cands {
		m, cur, ok := q.lookup(r)
		wm, wcur, wok := old(r)
		if m != wm || cur != wcur || ok != wok {
			t.Errorf("lookup(%q) = %v %v %v, Atoi's %v %v %v", r, m, cur, ok, wm, wcur, wok)
		}
		if ok {
			found++
		}
	}
	if found == 0 {
		t.Fatal("no candidate was found: the test compares nothing")
	}
}

// checkInvariants remembers times it found within their bounds, but a visibility moved out of
// them after a passing check is still caught, received or not.
func TestTimesCheckRemembersOnlyWhatItChecked(t *testing.T) {
	for _, received := range []bool{false, true} {
		for _, spoil := range []func(m *message){
			func(m *message) { m.visibleAt = m.visibleAt.Add(VisibilityCeiling + DelayMax + time.Second) },
			func(m *message) { m.visibleAt = m.sentAt.Add(-time.Second) },
		} {
			if spoiledAfterCheck(t, received, spoil) {
				t.Fatalf("received %v: spoiled times passed", received)
			}
		}
	}
}
