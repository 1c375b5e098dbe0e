package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Each fault does what it says, as the client and the target see it.
func TestEachFaultBreaksTheCallItsWay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cfg        Config
		reached    bool // the target saw the call
		status     int  // the client's status, 0 for a transport error
		body       string
		wantFault  Fault
		wantSpiked bool
	}{
		{name: "clean", reached: true, status: 200, body: `{"ok":true}`},
		{name: "reset-before", cfg: Config{ResetBefore: 1}, wantFault: FaultResetBefore},
		{name: "reset-after", cfg: Config{ResetAfter: 1}, reached: true, wantFault: FaultResetAfter},
		{name: "truncate", cfg: Config{Truncate: 1}, reached: true, wantFault: FaultTruncate},
		{name: "stall", cfg: Config{Stall: 1, StallFor: 10 * time.Millisecond}, wantFault: FaultStall},
		{name: "5xx", cfg: Config{ServerError: 1}, status: 500, body: "InternalError", wantFault: FaultServerError},
		{name: "throttle", cfg: Config{Throttle: 1}, status: 400, body: "ThrottlingException", wantFault: FaultThrottle},
		{name: "spike", cfg: Config{Spike: 1, SpikeMin: 20 * time.Millisecond, SpikeMax: 30 * time.Millisecond}, reached: true, status: 200, body: `{"ok":true}`, wantSpiked: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var hits atomic.Int32
			target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				io.WriteString(w, `{"ok":true}`)
			}))
			defer target.Close()
			cfg := tc.cfg
			cfg.Target = target.URL
			p, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			req, _ := http.NewRequest("POST", p.URL+"/", strings.NewReader(`{"ReceiptHandle":"r1"}`))
			req.Header.Set("X-Amz-Target", "AmazonSQS.DeleteMessage")
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
			status, body := 0, ""
			if err == nil {
				b, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr == nil {
					status, body = resp.StatusCode, string(b)
				}
			}
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("client got %d %q (err %v), want %d containing %q", status, body, err, tc.status, tc.body)
			}
			if got := hits.Load() == 1; got != tc.reached {
				t.Errorf("target reached %v, want %v", got, tc.reached)
			}
			p.Close()
			log := p.Log()
			if len(log) != 1 {
				t.Fatalf("%d records, want 1", len(log))
			}
			got := log[0]
			if diff := cmp.Diff(Record{Op: "DeleteMessage", Receipts: []string{"r1"}, Fault: tc.wantFault},
				Record{Op: got.Op, Receipts: got.Receipts, Fault: got.Fault}); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if (got.Spike > 0) != tc.wantSpiked || got.Answered.IsZero() == tc.reached {
				t.Errorf("spike %v, answered %v", got.Spike, got.Answered)
			}
		})
	}
}

// Faults stop at MaxFaults, and the proxy closes itself after Lifetime.
func TestFaultsAreBoundedInCountAndTime(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	defer target.Close()
	p, err := New(Config{Target: target.URL, ServerError: 1, MaxFaults: 3, Lifetime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var statuses []int
	for range 5 {
		resp, err := http.Post(p.URL, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
	if diff := cmp.Diff([]int{500, 500, 500, 200, 200}, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the proxy did not close itself after its Lifetime")
	}
	// done closes first in Close; Close returns once the self-close has ended.
	p.Close()
	if _, err := http.Post(p.URL, "application/json", strings.NewReader("{}")); err == nil {
		t.Error("a call through a closed proxy succeeded")
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, cfg := range []Config{{}, {Target: "http://x", ResetBefore: 0.7, ResetAfter: 0.7}, {Target: "http://x", Throttle: -0.1}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("New(%+v) accepted", cfg)
		}
	}
}
