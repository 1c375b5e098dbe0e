package queue

import (
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

// checkInvariants remembers a consistent receipt, but a change of the receipt, the count or
// the seq after it is still caught.
func TestReceiptCheckRemembersOnlyWhatItChecked(t *testing.T) {
	for _, spoil := range []func(m *message){
		func(m *message) { m.receipt = m.receipt + "0" },
		func(m *message) { m.count++ },
		func(m *message) { m.seq++ },
	} {
		q := New(Config{}, nil)
		now := time.Unix(0, 0)
		q.Send(now, []byte("x"))
		if got := q.Receive(now, 1, time.Minute); len(got) != 1 {
			t.Fatalf("received %d", len(got))
		}
		if err := q.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		spoil(q.msgs[0])
		if err := q.CheckInvariants(); err == nil {
			t.Fatal("a spoiled receipt passed")
		}
	}
}
