package queue

import "testing"

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
