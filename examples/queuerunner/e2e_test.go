package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/internal/fauxqs"
)

// childEnv makes the test binary a queuerunner process (the options JSON-encoded in it).
const childEnv = "QUEUERUNNER_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		var o struct {
			Endpoint, Queue, DLQ, Done, Trace string
			Work, Grace, Window               time.Duration
			Concurrency                       int
			FIFO, Orphan                      bool
		}
		if err := json.Unmarshal([]byte(v), &o); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if o.Orphan { // stop as on SIGTERM once the test binary is gone (its pipe closes)
			go func() {
				io.Copy(io.Discard, os.Stdin)
				stop()
			}()
		}
		err := run(ctx, options{endpoint: o.Endpoint, region: fauxqs.Region, queue: o.Queue, dlq: o.DLQ, done: o.Done,
			trace: o.Trace, window: cmp.Or(o.Window, 4*time.Second), concurrency: max(o.Concurrency, 1), work: o.Work, grace: o.Grace, fifo: o.FIFO})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type fleetEnv struct {
	t                testing.TB
	server           *fauxqs.Server
	queue, dlq, done string
}

func newFleetEnv(t testing.TB) *fleetEnv {
	s := fauxqs.Start(t)
	c, err := sqs.NewClient(context.Background(), sqs.ClientOptions{Endpoint: s.URL, Load: s.LoadOptions()})
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("fleet%d", time.Now().UnixNano())
	e := &fleetEnv{t: t, server: s, done: filepath.Join(t.TempDir(), "done")}
	if e.queue, err = sqs.CreateQueue(context.Background(), c, name, nil); err != nil {
		t.Fatal(err)
	}
	if e.dlq, err = sqs.CreateQueue(context.Background(), c, name+"-dead", nil); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *fleetEnv) opts() options {
	return options{endpoint: e.server.URL, region: fauxqs.Region, queue: e.queue, dlq: e.dlq, done: e.done, window: 4 * time.Second}
}

// start launches one queuerunner process (this test binary in child mode).
func (e *fleetEnv) start() *exec.Cmd { return e.startWith(20*time.Millisecond, 8) }

func (e *fleetEnv) startWith(work time.Duration, concurrency int) *exec.Cmd {
	e.t.Helper()
	v, _ := json.Marshal(map[string]any{"Endpoint": e.server.URL, "Queue": e.queue, "DLQ": e.dlq, "Done": e.done,
		"Work": work, "Concurrency": concurrency})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(v))
	cmd.Stderr = testWriter{e.t}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	return cmd
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// delivered reads the done file: each address and how often it was delivered.
func (e *fleetEnv) delivered() map[string]int {
	out := map[string]int{}
	f, err := os.Open(e.done)
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out[sc.Text()]++
	}
	return out
}

// dead receives every dead letter (hiding each for an hour) and returns them by address.
func (e *fleetEnv) dead(ctx context.Context, into map[string]qjobs.Attrs) {
	c, _ := sqs.NewClient(ctx, sqs.ClientOptions{Endpoint: e.server.URL, Load: e.server.LoadOptions()})
	tr, err := sqs.New(c, sqs.Config{QueueURL: e.dlq})
	if err != nil {
		e.t.Fatal(err)
	}
	for {
		msgs, err := tr.Receive(ctx, 10, 0, time.Hour)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			a, p, err := qjobs.Decode(m)
			if err != nil {
				e.t.Fatal(err)
			}
			var em Email
			if err := json.Unmarshal(p, &em); err != nil {
				e.t.Fatal(err)
			}
			into[em.To] = a
		}
	}
}

// TestThreeProcessesOneKilled: 300 jobs (some flaky, some bad) on fauxqs, three processes, one
// killed with SIGKILL once a third is delivered. Every job ends delivered or dead-lettered
// with its error; none is lost. Deliveries after the kill may repeat (at least once).
func TestThreeProcessesOneKilled(t *testing.T) {
	e := newFleetEnv(t)
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	_, emails, err := newRunner(ctx, e.opts(), quiet)
	if err != nil {
		t.Fatal(err)
	}
	const n = 300
	want := map[string]string{}
	var jobs []sluice.NewJob[Email]
	for i := range n {
		target := "ok"
		switch {
		case i%20 == 7:
			target = "bad"
		case i%10 == 3:
			target = "flaky"
		}
		to := target + "-" + strconv.Itoa(i)
		want[to] = target
		jobs = append(jobs, sluice.NewJob[Email]{Target: target, Payload: Email{To: to}})
	}
	if _, err := emails.EnqueueMany(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	procs := []*exec.Cmd{e.start(), e.start(), e.start()}
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
			p.Wait()
		}
	}()
	killed := false
	dead := map[string]qjobs.Attrs{}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		got := e.delivered()
		if !killed && len(got) >= n/3 {
			if err := procs[0].Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
			t.Logf("SIGKILL process 1 after %d deliveries", len(got))
		}
		e.dead(ctx, dead)
		if len(got)+len(dead) >= n && killed {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	got := e.delivered()
	var missing []string
	dups := 0
	for to, target := range want {
		a, isDead := dead[to]
		switch {
		case target == "bad":
			if !isDead || a.Reason != qjobs.ReasonPermanent || a.LastErr != "mailbox does not exist" || got[to] > 0 {
				t.Errorf("%s: dead=%v %+v delivered %d; want dead-lettered (permanent, its error)", to, isDead, a, got[to])
			}
		case got[to] == 0 && !isDead:
			missing = append(missing, to)
		case isDead:
			t.Errorf("%s dead-lettered: %+v", to, a)
		}
		dups += max(0, got[to]-1)
	}
	if len(missing) > 0 {
		t.Fatalf("%d jobs neither delivered nor dead-lettered (lost): %v", len(missing), missing[:min(10, len(missing))])
	}
	t.Logf("%d delivered, %d dead-lettered, %d duplicate deliveries (at least once, after the kill)", len(got), len(dead), dups)
}

// BenchmarkFleetThroughput runs b.N jobs (no work in the handler) on fauxqs with 1, 2 and 4
// processes of 10 handlers each and reports jobs/s from the first process start to the last
// delivery. Compare the ratios within one run: fauxqs on this machine is the bound, not the
// processes. go test -run '^$' -bench FleetThroughput -benchtime 2000x ./examples/queuerunner
func BenchmarkFleetThroughput(b *testing.B) {
	for _, procs := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("procs=%d", procs), func(b *testing.B) {
			e := newFleetEnv(b)
			ctx := context.Background()
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			_, emails, err := newRunner(ctx, e.opts(), quiet)
			if err != nil {
				b.Fatal(err)
			}
			jobs := make([]sluice.NewJob[Email], b.N)
			for i := range jobs {
				jobs[i] = sluice.NewJob[Email]{Target: "ok", Payload: Email{To: "ok-" + strconv.Itoa(i)}}
			}
			if _, err := emails.EnqueueMany(ctx, jobs); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			var cmds []*exec.Cmd
			for range procs {
				cmds = append(cmds, e.startWith(0, 10))
			}
			deadline := start.Add(5 * time.Minute)
			for len(e.delivered()) < b.N && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			elapsed := time.Since(start)
			b.StopTimer()
			for _, c := range cmds {
				c.Process.Signal(syscall.SIGTERM)
				c.Wait()
			}
			if got := len(e.delivered()); got < b.N {
				b.Fatalf("%d of %d delivered in %v", got, b.N, elapsed)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
		})
	}
}
