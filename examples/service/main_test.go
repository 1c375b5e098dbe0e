package main

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
)

// TestServiceEnqueuesServesAndStops runs the whole service on a loopback port: a signup is
// enqueued once however often it is posted, the UI refuses a request without the token and
// shows the job with it, /metrics exports the runner's instruments, and cancelling the
// context (what SIGTERM does) stops it with the job succeeded in the journal.
func TestServiceEnqueuesServesAndStops(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addrs := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, options{dir: dir, addr: "127.0.0.1:0", token: "t0ken", ready: func(a string) { addrs <- a }})
	}()
	var base string
	select {
	case a := <-addrs:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("service ended before listening: %v", err)
	}

	for range 2 {
		if got := call(t, "POST", base+"/signup?email="+url.QueryEscape("ada@example.com"), "", 200); got != "job 1\n" {
			t.Fatalf("signup answered %q, want the same job 1 both times", got)
		}
	}
	call(t, "GET", base+"/ops/jobs/", "", http.StatusForbidden)
	call(t, "GET", base+"/ops/jobs/", "Bearer wrong", http.StatusForbidden)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(call(t, "GET", base+"/ops/jobs/jobs/1", "Bearer t0ken", 200), "succeeded") {
		if time.Now().After(deadline) {
			t.Fatal("job 1 did not succeed within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if m := call(t, "GET", base+"/metrics", "", 200); !strings.Contains(m, "sluice_runner_jobs") {
		t.Errorf("/metrics lacks sluice_runner_jobs:\n%.2000s", m)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after the stop: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the service did not stop within 30s of its context ending")
	}
	in, err := sluice.Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Jobs) != 1 || in.Jobs[0].State != sluice.StateSucceeded || in.Jobs[0].Kind != "email" {
		t.Fatalf("journal after the stop holds %+v, want one succeeded email job", in.Jobs)
	}
}

// call sends one request and returns the body, failing the test on another status.
func call(t *testing.T, method, u, auth string, want int) string {
	t.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, u, resp.StatusCode, want, body)
	}
	return string(body)
}
