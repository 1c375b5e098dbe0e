package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/sqs"
	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/qjobs"
	"github.com/sluicehq/sluice/internal/faultproxy"
	"github.com/sluicehq/sluice/internal/fauxqs"
	"github.com/sluicehq/sluice/internal/flakyrun"
)

// fleetOpts shape one fleet run.
type fleetOpts struct {
	seed        int64
	jobs, slow  int           // jobs of the main batch; slow WithAttempts(1) jobs for the SIGTERM
	work        time.Duration // a normal job's handler time ("slow" ones take 10 times as long)
	concurrency int           // handlers per process
	killEvery   time.Duration // a SIGKILL (and a restart) about this often
	kills       int           // at most this many
	deadline    time.Duration // how long the jobs may take to end
	fifo        bool          // FIFO queues: each job its own group
	window      time.Duration // the visibility window (0: 4 s)
	dupsMax     float64       // duplicate successful runs per 100 jobs at most
}

// fleetReport is what a fleet run found.
type fleetReport struct {
	Jobs, Acked, Ambiguous, AmbiguousStored int // enqueues answered, and answered ErrSendUnknown
	Delivered, DeadLettered, DeadCopies     int
	Lost                                    []string      // acked, neither delivered nor dead-lettered
	Left                                    int           // messages still in the queue at the end
	AllEnded                                time.Duration // when every acked job had ended
	Runs, SuccessRuns, Duplicates           int
	DupCauses                               map[string]int // by what the earlier run's process met
	Overlaps                                []string       // two runs of one job at once
	Kills                                   int
	Stopped                                 []string // slow jobs running in the process SIGTERM stopped
	StopSpent                               []string // of those, ones whose stopped attempt was counted
	DeadWrongErr                            []string // dead letters without their last handler error
	DeadShouldNot                           []string // dead letters of jobs whose handler would have succeeded
	IDs                                     []string // jobs whose runs saw several ids, or ids shared by jobs
	Foreign                                 int      // messages of another producer sent to the queue
	ForeignChanged                          []string // ones not in the dead-letter queue as they came
	Faults, ProducerFaults                  map[string]int
	SendsLostAnswer                         int // the fleet's sends (re-sends, dead letters) stored with their answer lost
	Took                                    time.Duration
}

func (r fleetReport) per100() float64 { return float64(r.Duplicates) * 100 / float64(max(r.Acked, 1)) }

func (r fleetReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "jobs           %d enqueued (acked %d, ambiguous %d of which %d stored) in %v\n", r.Jobs, r.Acked, r.Ambiguous, r.AmbiguousStored, r.Took.Round(time.Millisecond))
	fmt.Fprintf(&b, "ended          delivered %d, dead-lettered %d (and %d copies), lost %d, %d left in the queue; all acked ended after %v\n",
		r.Delivered, r.DeadLettered, r.DeadCopies, len(r.Lost), r.Left, r.AllEnded.Round(time.Millisecond))
	fmt.Fprintf(&b, "runs           %d (successful %d), %d SIGKILLs, 1 SIGTERM\n", r.Runs, r.SuccessRuns, r.Kills)
	fmt.Fprintf(&b, "duplicates     %.2f successful runs per 100 jobs (%d, by cause %v)\n", r.per100(), r.Duplicates, r.DupCauses)
	fmt.Fprintf(&b, "overlaps       %d runs of one job at once\n", len(r.Overlaps))
	fmt.Fprintf(&b, "graceful stop  %d jobs stopped, %d attempts spent by it\n", len(r.Stopped), len(r.StopSpent))
	fmt.Fprintf(&b, "dead letters   %d without their last handler error, %d of jobs that would succeed\n", len(r.DeadWrongErr), len(r.DeadShouldNot))
	fmt.Fprintf(&b, "not jobs       %d sent, %d not dead-lettered as they came\n", r.Foreign, len(r.ForeignChanged))
	fmt.Fprintf(&b, "fleet sends    %d stored with their answer lost (each may leave a second copy of its job)\n", r.SendsLostAnswer)
	fmt.Fprintf(&b, "proxy faults   fleet %v, producer %v\n", r.Faults, r.ProducerFaults)
	return b.String()
}

// attemptRun is one handler run as the trace file shows it.
type attemptRun struct {
	to, id      string
	attempt     int
	pid         int
	start, end  time.Time // end is the kill time for a run SIGKILL cut short
	result      string    // "ok", the error, or "" when the process was killed
	hasEnd      bool
	killedInRun bool
	exitedInRun string // the process exited (Wait's error) with the run open
}

// how says how a run ended.
func (r attemptRun) how() string {
	switch {
	case r.hasEnd:
		return fmt.Sprintf("%q after %v", r.result, r.end.Sub(r.start).Round(time.Millisecond))
	case r.killedInRun:
		return "killed"
	case r.exitedInRun != "":
		return "its process exited: " + r.exitedInRun
	}
	return "still running"
}

// fleet is one run: fauxqs, the fault proxy in front of it, and the processes.
type fleet struct {
	t                   *testing.T
	o                   fleetOpts
	server              *fauxqs.Server
	px, producer        *faultproxy.Proxy // the fleet's and the producer's
	admin               *awssqs.Client
	queue, dlq          string
	done, trace         string
	mu                  sync.Mutex
	procs               []*exec.Cmd // live, by slot
	killedAt, stoppedAt map[int]time.Time
	exited              map[int]exit
	deadCopies          int // dead letters of a job already dead-lettered
	allDead             []deadLetter
}

// deadLetter is one dead letter of a job, copies included.
type deadLetter struct {
	to string
	a  qjobs.Attrs
}

// exit is when and how a process ended.
type exit struct {
	at  time.Time
	err error // from Wait: nil for exit status 0
}

func newFleet(t *testing.T, o fleetOpts) *fleet {
	s := fauxqs.Start(t)
	admin, err := sqs.NewClient(context.Background(), sqs.ClientOptions{Endpoint: s.URL, Load: s.LoadOptions()})
	if err != nil {
		t.Fatal(err)
	}
	cfg := flakyrun.Profile(o.seed)
	cfg.Target = s.URL
	cfg.SpikeMin, cfg.SpikeMax = time.Second, 5*time.Second // past the 4 s window at times
	px, err := faultproxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(px.Close)
	cfg.Seed = o.seed + 1 // the producer's own proxy: the fleet's log holds the fleet's calls only
	producer, err := faultproxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	dir := t.TempDir()
	f := &fleet{t: t, o: o, server: s, px: px, producer: producer, admin: admin, done: filepath.Join(dir, "done"), trace: filepath.Join(dir, "trace"),
		killedAt: map[int]time.Time{}, stoppedAt: map[int]time.Time{}, exited: map[int]exit{}}
	name, suffix, attrs := fmt.Sprintf("fleet%d", time.Now().UnixNano()), "", map[string]string(nil)
	if o.fifo {
		suffix, attrs = ".fifo", map[string]string{"FifoQueue": "true"}
	}
	if f.queue, err = sqs.CreateQueue(context.Background(), admin, name+suffix, attrs); err != nil {
		t.Fatal(err)
	}
	if f.dlq, err = sqs.CreateQueue(context.Background(), admin, name+"-dead"+suffix, attrs); err != nil {
		t.Fatal(err)
	}
	return f
}

// start launches one queuerunner process (this test binary in child mode) through the proxy.
func (f *fleet) start() *exec.Cmd {
	v, _ := json.Marshal(map[string]any{"Endpoint": f.px.URL, "Queue": f.queue, "DLQ": f.dlq, "Done": f.done,
		"Trace": f.trace, "Work": f.o.work, "Concurrency": f.o.concurrency, "Grace": time.Second, "FIFO": f.o.fifo, "Orphan": true, "Window": f.o.window})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(v))
	cmd.Stderr = io.Discard                    // faults make the processes log; the checks read the files
	if _, err := cmd.StdinPipe(); err != nil { // held open until this binary exits
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() {
		err := cmd.Wait()
		f.mu.Lock()
		defer f.mu.Unlock()
		f.exited[cmd.Process.Pid] = exit{at: time.Now(), err: err}
	}()
	return cmd
}

// signal sends sig to slot i's process and starts a new one in its place.
func (f *fleet) replace(i int, sig syscall.Signal) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.procs[i]
	pid := p.Process.Pid
	if sig == syscall.SIGKILL {
		f.killedAt[pid] = time.Now()
	} else {
		f.stoppedAt[pid] = time.Now()
	}
	if err := p.Process.Signal(sig); err != nil {
		f.t.Errorf("signal %v to %d: %v", sig, pid, err)
	}
	f.procs[i] = f.start()
	return pid
}

func (f *fleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.procs {
		p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range f.procs {
		for range 100 { // the grace is 1 s
			if p.ProcessState != nil || p.Process.Signal(syscall.Signal(0)) != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		p.Process.Kill()
	}
}

// enqueueResult says what the producer was told for each job, by address.
type enqueueResult struct {
	acked, ambiguous map[string]bool
}

// enqueue sends jobs in calls of 10 through the proxy, four callers at once. A call that
// failed without storing is sent again (at most 10 times); one answered ErrEnqueueUnknown
// is not, and its jobs are ambiguous.
func (f *fleet) enqueue(ctx context.Context, jobs []sluice.NewJob[Email], res *enqueueResult) {
	quiet := slog.New(slog.DiscardHandler)
	o := options{endpoint: f.producer.URL, region: fauxqs.Region, queue: f.queue, dlq: f.dlq, window: 4 * time.Second, fifo: f.o.fifo}
	_, emails, err := newRunner(ctx, o, quiet)
	if err != nil {
		f.t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	next := make(chan []sluice.NewJob[Email])
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for chunk := range next {
				var err error
				for try := 0; try < 10; try++ {
					if _, err = emails.EnqueueMany(ctx, chunk); err == nil || errors.Is(err, sluice.ErrEnqueueUnknown) {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				mu.Lock()
				for _, j := range chunk {
					switch {
					case err == nil:
						res.acked[j.Payload.To] = true
					case errors.Is(err, sluice.ErrEnqueueUnknown):
						res.ambiguous[j.Payload.To] = true
					default:
						f.t.Errorf("enqueue %s: %v", j.Payload.To, err)
					}
				}
				mu.Unlock()
			}
		}()
	}
	for lo := 0; lo < len(jobs); lo += 10 {
		next <- jobs[lo:min(lo+10, len(jobs))]
	}
	close(next)
	wg.Wait()
}

// inQueue counts the messages visible, in flight or delayed.
func (f *fleet) inQueue(ctx context.Context, url string) int {
	n, err := flakyrun.InQueue(ctx, f.admin, url)
	if err != nil {
		f.t.Fatal(err)
	}
	return n
}

// runs reads the trace file: every run, its end set to the kill time when SIGKILL cut it.
func (f *fleet) runs() []attemptRun {
	file, err := os.Open(f.trace)
	if err != nil {
		return nil
	}
	defer file.Close()
	open := map[string]int{} // pid/run -> index in out
	var out []attemptRun
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		p := strings.Split(sc.Text(), "\t")
		if len(p) < 7 {
			f.t.Fatalf("trace line %q", sc.Text())
		}
		attempt, _ := strconv.Atoi(p[3])
		pid, _ := strconv.Atoi(p[4])
		ns, _ := strconv.ParseInt(p[6], 10, 64)
		key := p[4] + "/" + p[5] // the process and its run number
		switch p[0] {
		case "start":
			open[key] = len(out)
			out = append(out, attemptRun{to: p[1], id: p[2], attempt: attempt, pid: pid, start: time.Unix(0, ns)})
		case "end":
			if i, ok := open[key]; ok {
				out[i].end, out[i].hasEnd, out[i].result = time.Unix(0, ns), true, strings.Join(p[7:], "\t")
				delete(open, key)
			}
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range out {
		if out[i].hasEnd {
			continue
		}
		out[i].end = time.Now() // still running
		if at, ok := f.killedAt[out[i].pid]; ok {
			out[i].end, out[i].killedInRun = at, true
		} else if e, ok := f.exited[out[i].pid]; ok {
			out[i].end, out[i].exitedInRun = e.at, fmt.Sprint(e.err)
		}
	}
	return out
}

// delivered reads the done file: how often each address was delivered.
func (f *fleet) delivered() map[string]int {
	out := map[string]int{}
	file, err := os.Open(f.done)
	if err != nil {
		return out
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	for sc.Scan() {
		out[sc.Text()]++
	}
	return out
}

// deadLetters receives every dead letter (hiding each for an hour) into into, by address,
// and the messages of another producer into foreign, by body.
func (f *fleet) deadLetters(ctx context.Context, into map[string]qjobs.Attrs, foreign map[string]core.Message) {
	tr, err := sqs.New(f.admin, sqs.Config{QueueURL: f.dlq})
	if err != nil {
		f.t.Fatal(err)
	}
	for {
		msgs, err := tr.Receive(ctx, 10, 0, time.Hour)
		if err != nil {
			f.t.Fatal(err)
		}
		if len(msgs) == 0 {
			return
		}
		for _, m := range msgs {
			if strings.HasPrefix(string(m.Body), "foreign-") {
				foreign[string(m.Body)] = m
				continue
			}
			a, p, err := qjobs.Decode(m)
			var em Email
			if err == nil {
				err = json.Unmarshal(p, &em)
			}
			if err != nil {
				f.t.Errorf("dead letter %s: %v", m.ID, err)
				continue
			}
			if _, ok := into[em.To]; ok {
				f.deadCopies++
			}
			into[em.To] = a
			f.allDead = append(f.allDead, deadLetter{to: em.To, a: a})
		}
	}
}

// targetOf is the target of the main batch's job i: mostly ok, some flaky (fail once), some
// busy (always fail, retryably), some bad (fail permanently).
func targetOf(i int) string {
	switch {
	case i%20 == 7:
		return "bad"
	case i%25 == 11:
		return "busy"
	case i%10 == 3:
		return "flaky"
	}
	return "ok"
}

// run runs the fleet: three processes, the main batch enqueued through the proxy, a SIGKILL
// (and a restart) about every killEvery, and once the slow jobs run, a SIGTERM to a process
// running some of them. It returns when every acked job ended and the queue is empty, or at
// the deadline.
func (f *fleet) run(ctx context.Context) fleetReport {
	start := time.Now()
	rnd := rand.New(rand.NewSource(f.o.seed))
	f.procs = []*exec.Cmd{f.start(), f.start(), f.start()}
	defer f.stopAll()
	var jobs []sluice.NewJob[Email]
	for i := range f.o.jobs {
		target := targetOf(i)
		jobs = append(jobs, sluice.NewJob[Email]{Target: target, Payload: Email{To: target + "-" + strconv.Itoa(i)}})
	}
	var slow []sluice.NewJob[Email]
	for i := range f.o.slow {
		slow = append(slow, sluice.NewJob[Email]{Target: "slow", Payload: Email{To: "slow-" + strconv.Itoa(i)},
			Options: []sluice.JobOption{sluice.WithAttempts(1)}})
	}
	res := &enqueueResult{acked: map[string]bool{}, ambiguous: map[string]bool{}}
	f.enqueue(ctx, jobs, res)
	rep := fleetReport{Jobs: len(jobs) + len(slow)}
	dead, foreign := map[string]qjobs.Attrs{}, map[string]core.Message{}
	if !f.o.fifo {
		rep.Foreign = f.sendForeign(ctx)
	}
	nextKill := start.Add(f.o.killEvery)
	stopPID := 0
	deadline := start.Add(f.o.deadline)
	for time.Now().Before(deadline) {
		if rep.Kills < f.o.kills && time.Now().After(nextKill) {
			f.replace(rnd.Intn(len(f.procs)), syscall.SIGKILL)
			rep.Kills++
			nextKill = time.Now().Add(f.o.killEvery/2 + time.Duration(rnd.Int63n(int64(f.o.killEvery))))
			if rep.Kills == 1 {
				f.enqueue(ctx, slow, res)
			}
		}
		if stopPID == 0 && rep.Kills >= 1 {
			stopPID = f.maybeStop()
		}
		f.deadLetters(ctx, dead, foreign)
		got := f.delivered()
		ended := true
		for to := range res.acked {
			if _, isDead := dead[to]; got[to] == 0 && !isDead {
				ended = false
				break
			}
		}
		if ended && rep.AllEnded == 0 {
			rep.AllEnded = time.Since(start)
		}
		if ended && stopPID != 0 && rep.Kills >= min(2, f.o.kills) && f.inQueue(ctx, f.queue) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	f.stopAll()
	f.deadLetters(ctx, dead, foreign)
	rep.Took, rep.Left = time.Since(start), f.inQueue(ctx, f.queue)
	rep.Faults, rep.ProducerFaults = f.px.Faults(), f.producer.Faults()
	for _, r := range f.px.Log() {
		if (r.Op == "SendMessage" || r.Op == "SendMessageBatch") && r.Status == 200 &&
			(r.Fault == faultproxy.FaultResetAfter || r.Fault == faultproxy.FaultTruncate) {
			rep.SendsLostAnswer++
		}
	}
	rep.Acked, rep.Ambiguous = len(res.acked), len(res.ambiguous)
	got := f.delivered()
	for to := range res.ambiguous {
		if _, isDead := dead[to]; got[to] > 0 || isDead {
			rep.AmbiguousStored++
		}
	}
	for to := range res.acked {
		if _, isDead := dead[to]; got[to] == 0 && !isDead {
			rep.Lost = append(rep.Lost, to)
		}
	}
	sort.Strings(rep.Lost)
	rep.Delivered, rep.DeadLettered, rep.DeadCopies = len(got), len(dead), f.deadCopies
	for i := range rep.Foreign {
		body, want := foreignMessage(i)
		got, ok := foreign[body]
		for k, v := range want {
			if !ok || !cmp.Equal(v, got.Typed[k]) {
				rep.ForeignChanged = append(rep.ForeignChanged, fmt.Sprintf("%s: attribute %s sent %+v, dead letter has %+v (received: %v)", body, k, v, got.Typed[k], ok))
			}
		}
	}
	runs := f.runs()
	f.check(&rep, runs, f.allDead, stopPID)
	return rep
}

// foreignMessage is the i-th message of another producer: no String sluice-kind, so not a
// job, with attributes of every type (the first with a Binary sluice-kind).
func foreignMessage(i int) (string, map[string]core.Attribute) {
	a := map[string]core.Attribute{
		"origin": {Type: "String", String: "billing"},
		"amount": {Type: "Number", String: strconv.Itoa(i) + ".50"},
		"count":  {Type: "Number.int", String: strconv.Itoa(i)},
		"sig":    {Type: "Binary", Binary: []byte{byte(i), 0, 0xff}},
	}
	if i == 0 {
		a[qjobs.AttrKind] = core.Attribute{Type: "Binary", Binary: []byte("email")}
	}
	return "foreign-" + strconv.Itoa(i), a
}

// sendForeign sends foreign messages straight to the queue and returns how many.
func (f *fleet) sendForeign(ctx context.Context) int {
	const n = 5
	snd, err := sqs.NewSender(f.admin, sqs.Config{QueueURL: f.queue})
	if err != nil {
		f.t.Fatal(err)
	}
	msgs := make([]core.Outgoing, n)
	for i := range msgs {
		body, typed := foreignMessage(i)
		msgs[i] = core.Outgoing{Body: []byte(body), Typed: typed}
	}
	errs, err := snd.SendBatch(ctx, msgs)
	if err == nil {
		err = errors.Join(errs...)
	}
	if err != nil {
		f.t.Fatalf("send foreign messages: %v", err)
	}
	return n
}

// maybeStop sends the SIGTERM to a process running slow jobs, if one is; it returns the
// stopped process's id, or 0.
func (f *fleet) maybeStop() int {
	running := map[int]int{}
	for _, r := range f.runs() {
		if strings.HasPrefix(r.to, "slow-") && !r.hasEnd && !r.killedInRun {
			running[r.pid]++
		}
	}
	f.mu.Lock()
	slot := -1
	for i, p := range f.procs {
		if running[p.Process.Pid] > 0 {
			slot = i
		}
	}
	f.mu.Unlock()
	if slot < 0 {
		return 0
	}
	return f.replace(slot, syscall.SIGTERM)
}

// cancelled reports a run that ended without an outcome of the handler's own.
func cancelled(result string) bool {
	return result == "" || result == context.Canceled.Error() || result == context.DeadlineExceeded.Error()
}

// check fills the report's findings from the runs and the dead letters.
func (f *fleet) check(rep *fleetReport, runs []attemptRun, deadList []deadLetter, stopPID int) {
	dead := map[string]qjobs.Attrs{}
	for _, d := range deadList {
		dead[d.to] = d.a
	}
	byJob := map[string][]attemptRun{}
	for _, r := range runs {
		byJob[r.to] = append(byJob[r.to], r)
	}
	for to, rs := range byJob {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		var last attemptRun // the run that ends last so far
		ok := 0
		for i, r := range rs {
			rep.Runs++
			if r.result == "ok" {
				ok++
			}
			if i > 0 && r.start.Before(last.end) {
				rep.Overlaps = append(rep.Overlaps, fmt.Sprintf("%s: attempt %d in %d started %v before attempt %d in %d ended (%s)",
					to, r.attempt, r.pid, last.end.Sub(r.start).Round(time.Millisecond), last.attempt, last.pid, last.how()))
			}
			if i == 0 || r.end.After(last.end) {
				last = r
			}
			if r.pid == stopPID && strings.HasPrefix(to, "slow-") && cancelled(r.result) {
				rep.Stopped = append(rep.Stopped, to)
				_, isDead := dead[to]
				if isDead || i+1 == len(rs) || rs[i+1].attempt > r.attempt {
					rep.StopSpent = append(rep.StopSpent, to)
				}
			}
		}
		rep.SuccessRuns += ok
		rep.Duplicates += max(0, ok-1)
		f.dupCauses(rep, rs)
	}
	rep.IDs = checkIDs(byJob)
	for _, d := range deadList {
		if msg := wrongDeadLetter(byJob[d.to], d.a); msg != "" {
			rep.DeadWrongErr = append(rep.DeadWrongErr, d.to+": "+msg)
		}
		if target, _, _ := strings.Cut(d.to, "-"); target != "bad" && target != "busy" {
			rep.DeadShouldNot = append(rep.DeadShouldNot, fmt.Sprintf("%s: %s, %q", d.to, d.a.Reason, d.a.LastErr))
		}
	}
	for _, l := range []*[]string{&rep.IDs, &rep.Overlaps, &rep.Stopped, &rep.StopSpent, &rep.DeadWrongErr, &rep.DeadShouldNot} {
		slices.Sort(*l)
	}
}

// dupCauses counts each successful run after a job's first by what kept the earlier one's
// delete from the queue, as far as the processes' fates tell: its process was killed (or
// stopped) within a window of the success, or else the network (a lease or a delete lost,
// or a second copy of the job from a send whose answer was lost).
func (f *fleet) dupCauses(rep *fleetReport, rs []attemptRun) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var prev *attemptRun
	for i := range rs {
		if rs[i].result != "ok" {
			continue
		}
		if prev != nil {
			cause := "network"
			if at, ok := f.killedAt[prev.pid]; ok && at.After(prev.end) && at.Sub(prev.end) < 4*time.Second {
				cause = "kill"
			} else if at, ok := f.stoppedAt[prev.pid]; ok && at.After(prev.end) && at.Sub(prev.end) < 4*time.Second {
				cause = "stop"
			}
			if rep.DupCauses == nil {
				rep.DupCauses = map[string]int{}
			}
			rep.DupCauses[cause]++
		}
		prev = &rs[i]
	}
}

// wrongDeadLetter says what is wrong with a dead letter of the job whose runs are rs: its
// error must be one its handler returned on the job's latest attempt that reported (copies
// of a job may each have run that attempt), and its id the id the runs saw.
func wrongDeadLetter(rs []attemptRun, a qjobs.Attrs) string {
	latest, errs := 0, []string(nil)
	for _, r := range rs {
		switch {
		case !r.hasEnd || cancelled(r.result) || r.result == "ok" || r.attempt < latest:
		case r.attempt > latest:
			latest, errs = r.attempt, []string{r.result}
		default:
			errs = append(errs, r.result)
		}
	}
	if len(rs) > 0 && strconv.FormatUint(a.ID, 10) != rs[0].id {
		return fmt.Sprintf("dead letter of id %d, the runs saw %s", a.ID, rs[0].id)
	}
	for _, e := range errs {
		if a.LastErr != "" && strings.HasSuffix(e, a.LastErr) {
			return ""
		}
	}
	return fmt.Sprintf("dead letter says %q (%s, %d lost deliveries), the handler's errors on attempt %d: %q", a.LastErr, a.Reason, a.Lost, latest, errs)
}

// checkIDs reports jobs whose runs saw no id (0) or more than one, and ids two jobs share.
func checkIDs(byJob map[string][]attemptRun) (problems []string) {
	owner := map[string]string{}
	for to, rs := range byJob {
		if rs[0].id == "0" {
			problems = append(problems, to+": no id")
		}
		for _, r := range rs {
			if r.id != rs[0].id {
				problems = append(problems, fmt.Sprintf("%s: runs saw ids %s and %s", to, rs[0].id, r.id))
				break
			}
		}
		if other, ok := owner[rs[0].id]; ok && rs[0].id != "0" {
			problems = append(problems, fmt.Sprintf("%s and %s: one id %s", other, to, rs[0].id))
		}
		owner[rs[0].id] = to
	}
	return problems
}

// The duplicate bounds: duplicate successful runs per 100 jobs under the fault profile, the
// kills and the stop, the most measured with margin. The goal is 1 on a standard queue.
//   - standard queue, 8 s window: seeds 1-5 measured 0.83, 0.00, 1.10, 0.51, 1.61;
//   - FIFO queues, 4 s window (spikes of up to 5 s outlive leases, so more runs repeat):
//     seeds 1-5 measured 0.94, 0.94, 0.47, 0.00, 0.47 (2.83 the most seen). The standard
//     queue with this window measured 0.51 to 3.23.
const (
	dupsPer100MaxStandard = 3
	dupsPer100MaxFIFO     = 5
)

// TestFleetKeepsTheLocalRunnersPromises: three queuerunner processes on fauxqs, every call
// through the seeded fault proxy (flakyrun's network: resets before and after the call took
// effect, truncated answers, stalls, 5xx, throttling, latency spikes past the window), jobs
// enqueued through the same proxy, a SIGKILL about every 3 s (each process replaced), and a
// SIGTERM to a process running WithAttempts(1) jobs that take longer than its grace; on a
// standard queue (400 jobs, 8 s window) and on FIFO queues (200 jobs, 4 s window), at once.
// SLUICE_FLEET_SEED picks another seed, SLUICE_FLEET_WINDOW another window for both.
func TestFleetKeepsTheLocalRunnersPromises(t *testing.T) {
	if testing.Short() {
		t.Skip("fleet test: about 40 s of real processes; skipped in -short mode")
	}
	if _, err := exec.LookPath("node"); err != nil && os.Getenv("CI") == "" {
		t.Skip("fleet test: node not found (fauxqs needs Node >= 20; .ci/run installs it, and in CI this test runs)")
	}
	seed, window := int64(1), time.Duration(0)
	if v := os.Getenv("SLUICE_FLEET_WINDOW"); v != "" {
		var err error
		if window, err = time.ParseDuration(v); err != nil {
			t.Fatalf("SLUICE_FLEET_WINDOW=%q: %v", v, err)
		}
	}
	if v := os.Getenv("SLUICE_FLEET_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("SLUICE_FLEET_SEED=%q: %v", v, err)
		}
	}
	o := fleetOpts{seed: seed, window: orDefault(window, 8*time.Second), jobs: 400, slow: 12, work: 300 * time.Millisecond,
		concurrency: 6, killEvery: 3 * time.Second, kills: 4, dupsMax: dupsPer100MaxStandard,
		deadline: 90 * time.Second} // 20-40 s here; the deadline is for a loaded machine
	t.Run("standard", func(t *testing.T) {
		t.Parallel()
		runFleet(t, o)
	})
	t.Run("fifo", func(t *testing.T) {
		t.Parallel()
		fo := o
		fo.fifo, fo.jobs, fo.seed, fo.window, fo.dupsMax = true, 200, seed+1000, orDefault(window, 4*time.Second), dupsPer100MaxFIFO
		rep := runFleet(t, fo)
		if len(rep.Overlaps) > 0 {
			t.Errorf("%d overlapping runs of one job on FIFO queues, e.g. %s", len(rep.Overlaps), rep.Overlaps[0])
		}
	})
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// runFleet runs one fleet, logs its report and asserts what every queue keeps.
func runFleet(t *testing.T, o fleetOpts) fleetReport {
	f := newFleet(t, o)
	rep := f.run(context.Background())
	t.Log("\n" + rep.String())
	for _, l := range [][]string{rep.Lost, rep.Overlaps, rep.StopSpent, rep.DeadWrongErr, rep.DeadShouldNot, rep.IDs, rep.ForeignChanged} {
		for _, s := range l[:min(len(l), 5)] {
			t.Log(s)
		}
	}
	if len(rep.Lost) > 0 {
		t.Errorf("%d acked jobs neither delivered nor dead-lettered (lost, or not ended in %v with %d messages left in the queue): %v",
			len(rep.Lost), o.deadline, rep.Left, rep.Lost[:min(10, len(rep.Lost))])
	}
	if rep.Kills < 2 || len(rep.Stopped) == 0 || rep.Faults["reset-after"] == 0 {
		t.Errorf("the run exercised too little: %d kills, %d jobs stopped by the SIGTERM, faults %v, producer %v", rep.Kills, len(rep.Stopped), rep.Faults, rep.ProducerFaults)
	}
	if len(rep.IDs) > 0 {
		t.Errorf("%d jobs without one id of their own, e.g. %s", len(rep.IDs), rep.IDs[0])
	}
	if rep.per100() > o.dupsMax {
		t.Errorf("%.2f duplicate successful runs per 100 jobs, over the bound of %v", rep.per100(), o.dupsMax)
	}
	if len(rep.ForeignChanged) > 0 {
		t.Errorf("%d attributes of other producers' messages not kept in the dead-letter queue: %v", len(rep.ForeignChanged), rep.ForeignChanged)
	}
	if len(rep.StopSpent) > 0 {
		t.Errorf("the graceful stop spent the attempt of %d of %d jobs it stopped: %v", len(rep.StopSpent), len(rep.Stopped), rep.StopSpent)
	}
	if len(rep.DeadWrongErr) > 0 || len(rep.DeadShouldNot) > 0 {
		t.Errorf("%d dead letters without their last handler error, %d of jobs whose handler would succeed", len(rep.DeadWrongErr), len(rep.DeadShouldNot))
	}
	return rep
}

// TestFleetCheckCatchesPlantedDefects feeds check runs and dead letters with one planted
// defect each, and a clean set that must pass: each finding fires on its defect alone.
func TestFleetCheckCatchesPlantedDefects(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	clean := []attemptRun{
		{to: "ok-1", id: "7", attempt: 1, pid: 10, start: at(0), end: at(1), result: "ok", hasEnd: true},
		{to: "slow-1", id: "8", attempt: 1, pid: 10, start: at(0), end: at(2), result: "context canceled", hasEnd: true},
		{to: "slow-1", id: "8", attempt: 1, pid: 11, start: at(3), end: at(4), result: "ok", hasEnd: true},
		{to: "busy-1", id: "9", attempt: 1, pid: 11, start: at(0), end: at(1), result: "smtp: 451 mailbox busy (attempt 1)", hasEnd: true},
		{to: "busy-1", id: "9", attempt: 2, pid: 12, start: at(2), end: at(3), result: "smtp: 451 mailbox busy (attempt 2)", hasEnd: true},
	}
	cleanDead := map[string]qjobs.Attrs{"busy-1": {ID: 9, LastErr: "smtp: 451 mailbox busy (attempt 2)", Reason: qjobs.ReasonSpent}}
	findings := func(runs []attemptRun, dead map[string]qjobs.Attrs) map[string]int {
		var rep fleetReport
		var list []deadLetter
		for to, a := range dead {
			list = append(list, deadLetter{to: to, a: a})
		}
		(&fleet{}).check(&rep, runs, list, 10)
		got := map[string]int{}
		for name, l := range map[string][]string{"ids": rep.IDs, "overlaps": rep.Overlaps, "stop-spent": rep.StopSpent,
			"dead-wrong-err": rep.DeadWrongErr, "dead-should-not": rep.DeadShouldNot} {
			if len(l) > 0 {
				got[name] = len(l)
			}
		}
		if rep.Duplicates > 0 {
			got["duplicates"] = rep.Duplicates
		}
		return got
	}
	if got := findings(clean, cleanDead); len(got) > 0 {
		t.Fatalf("clean runs: findings %v", got)
	}
	with := func(change func(rs []attemptRun, dead map[string]qjobs.Attrs) []attemptRun) ([]attemptRun, map[string]qjobs.Attrs) {
		rs := slices.Clone(clean)
		dead := map[string]qjobs.Attrs{}
		for k, v := range cleanDead {
			dead[k] = v
		}
		return change(rs, dead), dead
	}
	tests := []struct {
		name  string
		plant func(rs []attemptRun, dead map[string]qjobs.Attrs) []attemptRun
		want  map[string]int
	}{
		{"a second run before the first ended", func(rs []attemptRun, _ map[string]qjobs.Attrs) []attemptRun {
			return append(rs, attemptRun{to: "ok-1", id: "7", attempt: 1, pid: 11, start: at(0).Add(500 * time.Millisecond), end: at(2), result: "context canceled", hasEnd: true})
		}, map[string]int{"overlaps": 1}},
		{"a second successful run", func(rs []attemptRun, _ map[string]qjobs.Attrs) []attemptRun {
			return append(rs, attemptRun{to: "ok-1", id: "7", attempt: 1, pid: 11, start: at(5), end: at(6), result: "ok", hasEnd: true})
		}, map[string]int{"duplicates": 1}},
		{"the stopped attempt counted", func(rs []attemptRun, _ map[string]qjobs.Attrs) []attemptRun {
			rs[2].attempt = 2
			return rs
		}, map[string]int{"stop-spent": 1}},
		{"the stopped job dead-lettered", func(rs []attemptRun, dead map[string]qjobs.Attrs) []attemptRun {
			dead["slow-1"] = qjobs.Attrs{ID: 8, LastErr: "attempt 1 ended without an outcome", Reason: qjobs.ReasonSpent}
			return append(rs[:2], rs[3:]...)
		}, map[string]int{"stop-spent": 1, "dead-wrong-err": 1, "dead-should-not": 1}},
		{"a dead letter with an earlier error", func(rs []attemptRun, dead map[string]qjobs.Attrs) []attemptRun {
			dead["busy-1"] = qjobs.Attrs{ID: 9, LastErr: "smtp: 451 mailbox busy (attempt 1)", Reason: qjobs.ReasonSpent}
			return rs
		}, map[string]int{"dead-wrong-err": 1}},
		{"a dead letter of another id", func(rs []attemptRun, dead map[string]qjobs.Attrs) []attemptRun {
			dead["busy-1"] = qjobs.Attrs{ID: 99, LastErr: "smtp: 451 mailbox busy (attempt 2)", Reason: qjobs.ReasonSpent}
			return rs
		}, map[string]int{"dead-wrong-err": 1}},
		{"one job, two ids", func(rs []attemptRun, _ map[string]qjobs.Attrs) []attemptRun {
			rs[4].id = "10"
			return rs
		}, map[string]int{"ids": 1}},
		{"two jobs, one id", func(rs []attemptRun, _ map[string]qjobs.Attrs) []attemptRun {
			rs[0].id = "9"
			return rs
		}, map[string]int{"ids": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, findings(with(tt.plant))); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}
