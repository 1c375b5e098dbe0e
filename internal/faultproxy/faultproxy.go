// Package faultproxy is a seeded HTTP fault proxy for tests: it listens on 127.0.0.1, forwards
// each request to one target (an SQS-compatible server such as fauxqs) and, by a seeded draw
// per request, breaks some of them the ways a real network does: latency with spikes, a
// connection reset before the call reaches the target or after it took effect there, a
// truncated answer, a stall, a synthesized 5xx or throttling answer.
//
// Rules:
//
//  1. Fates are drawn from one *rand.Rand seeded with Config.Seed, in the order requests
//     arrive: the mix of faults is reproducible, which call gets which is not (requests from
//     concurrent clients race to the proxy).
//  2. Bounded: at most Config.MaxFaults faults are injected (then every call is forwarded
//     cleanly), every delay ends when the proxy closes, and the proxy closes by itself after
//     Config.Lifetime (default 10 min) if nobody closed it.
//  3. A request that was forwarded is forwarded whole, on a context of its own (ended only by
//     Close): a client that gives up does not stop a call already on its way, as on a real
//     network.
//  4. Every request is recorded (Log) with when it entered the proxy (Sent: the client sent
//     it), when the target answered (Answered, zero if never forwarded), the receipt handles
//     it names, and for a ReceiveMessage the deliveries the target handed out. Records are the
//     target's view of the calls: a checker reads them after Close.
package faultproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config configures a Proxy. Probabilities are per request, drawn in this order; their sum
// must be at most 1.
type Config struct {
	Target string // base URL of the server, e.g. http://127.0.0.1:4566
	Seed   int64

	LatencyMin, LatencyMax time.Duration // each way, every forwarded call
	Spike                  float64       // a latency spike, before forwarding or after the answer
	SpikeMin, SpikeMax     time.Duration

	ResetBefore float64       // the connection is reset; the target never sees the call
	ResetAfter  float64       // the call takes effect at the target; the answer is lost (reset)
	Truncate    float64       // the call takes effect; half the answer arrives, then a reset
	Stall       float64       // nothing happens for StallFor (or until the client gives up), then a reset
	StallFor    time.Duration // default 10 s
	ServerError float64       // a synthesized 500 InternalError; the target never sees the call
	Throttle    float64       // a synthesized 400 ThrottlingException; the target never sees the call

	MaxFaults int           // faults injected at most (0: no limit)
	Lifetime  time.Duration // the proxy closes itself after this; default 10 min
}

// Fault names what the proxy did to a call.
type Fault string

const (
	FaultNone        Fault = ""
	FaultResetBefore Fault = "reset-before"
	FaultResetAfter  Fault = "reset-after"
	FaultTruncate    Fault = "truncate"
	FaultStall       Fault = "stall"
	FaultServerError Fault = "5xx"
	FaultThrottle    Fault = "throttle"
)

// Delivery is one message a ReceiveMessage answer handed out.
type Delivery struct {
	MessageID    string
	Receipt      string
	ReceiveCount int
}

// Record is one call as the proxy saw it.
type Record struct {
	Op         string // the X-Amz-Target operation, e.g. "DeleteMessageBatch"
	Receipts   []string
	Deliveries []Delivery // ReceiveMessage: what the target handed out (lost or not)
	Fault      Fault
	Spike      time.Duration
	Sent       time.Time // entered the proxy
	Answered   time.Time // the target answered; zero when it never saw the call
	Status     int       // the target's status code
	Failed     []string  // receipts whose batch entry the target failed
}

// Proxy is a running fault proxy.
type Proxy struct {
	URL string

	cfg    Config
	ln     net.Listener
	srv    *http.Server
	client *http.Client
	done   chan struct{}
	timer  *time.Timer
	once   sync.Once
	base   context.Context // ends when the proxy closes: forwarded calls end with it
	stop   context.CancelFunc
	calls  sync.WaitGroup // handlers running

	mu     sync.Mutex
	rnd    *rand.Rand
	faults int
	counts map[Fault]int
	log    []Record
}

// New starts a proxy for cfg on 127.0.0.1 (a free port).
func New(cfg Config) (*Proxy, error) {
	if cfg.Target == "" {
		return nil, errors.New("faultproxy: empty Target")
	}
	sum := cfg.Spike
	for _, p := range []float64{cfg.ResetBefore, cfg.ResetAfter, cfg.Truncate, cfg.Stall, cfg.ServerError, cfg.Throttle} {
		if p < 0 {
			return nil, fmt.Errorf("faultproxy: negative probability %v", p)
		}
		sum += p
	}
	if sum > 1 || cfg.Spike < 0 || cfg.Spike > 1 {
		return nil, fmt.Errorf("faultproxy: fault probabilities sum to %v, over 1", sum)
	}
	if cfg.StallFor == 0 {
		cfg.StallFor = 10 * time.Second
	}
	if cfg.Lifetime == 0 {
		cfg.Lifetime = 10 * time.Minute
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: listen: %w", err)
	}
	p := &Proxy{
		URL: "http://" + ln.Addr().String(), cfg: cfg, ln: ln, done: make(chan struct{}),
		rnd: rand.New(rand.NewSource(cfg.Seed)), counts: map[Fault]int{},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	p.base, p.stop = context.WithCancel(context.Background())
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second}
	go p.srv.Serve(ln)
	p.timer = time.AfterFunc(cfg.Lifetime, p.Close)
	return p, nil
}

// Close stops the proxy: it refuses new connections, resets open ones, ends every delay and
// forwarded call, and returns once every call is recorded. It is idempotent.
func (p *Proxy) Close() {
	p.once.Do(func() {
		close(p.done)
		p.stop()
		p.timer.Stop()
		p.srv.Close()
		p.calls.Wait()
		p.client.CloseIdleConnections()
	})
}

// Log returns a copy of the records so far, in the order calls entered the proxy.
func (p *Proxy) Log() []Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Record(nil), p.log...)
}

// Faults returns how many faults of each kind were injected (spikes under "spike").
func (p *Proxy) Faults() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for f, n := range p.counts {
		out[string(f)] = n
	}
	return out
}

// draw picks a call's fate and its latencies.
func (p *Proxy) draw() (f Fault, spike, out, back time.Duration, spikeFirst bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lat := func() time.Duration {
		if p.cfg.LatencyMax <= p.cfg.LatencyMin {
			return p.cfg.LatencyMin
		}
		return p.cfg.LatencyMin + time.Duration(p.rnd.Int63n(int64(p.cfg.LatencyMax-p.cfg.LatencyMin)))
	}
	out, back = lat(), lat()
	u := p.rnd.Float64()
	spikeFirst = p.rnd.Intn(2) == 0
	if p.cfg.MaxFaults > 0 && p.faults >= p.cfg.MaxFaults {
		return FaultNone, 0, out, back, false
	}
	if u < p.cfg.Spike {
		spike = p.cfg.SpikeMin
		if p.cfg.SpikeMax > p.cfg.SpikeMin {
			spike += time.Duration(p.rnd.Int63n(int64(p.cfg.SpikeMax - p.cfg.SpikeMin)))
		}
		p.faults++
		p.counts["spike"]++
		return FaultNone, spike, out, back, spikeFirst
	}
	u -= p.cfg.Spike
	for _, c := range []struct {
		p float64
		f Fault
	}{{p.cfg.ResetBefore, FaultResetBefore}, {p.cfg.ResetAfter, FaultResetAfter}, {p.cfg.Truncate, FaultTruncate},
		{p.cfg.Stall, FaultStall}, {p.cfg.ServerError, FaultServerError}, {p.cfg.Throttle, FaultThrottle}} {
		if u < c.p {
			p.faults++
			p.counts[c.f]++
			return c.f, 0, out, back, false
		}
		u -= c.p
	}
	return FaultNone, 0, out, back, false
}

// sleep waits d, or less if the proxy closes.
func (p *Proxy) sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-p.done:
	}
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.calls.Add(1)
	defer p.calls.Done()
	rec := Record{Sent: time.Now(), Op: op(r)}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		p.reset(w)
		return
	}
	rec.Receipts = receiptsOf(body)
	f, spike, out, back, spikeFirst := p.draw()
	rec.Fault, rec.Spike = f, spike
	defer func() {
		p.mu.Lock()
		p.log = append(p.log, rec)
		p.mu.Unlock()
	}()
	p.sleep(out)
	switch f {
	case FaultResetBefore:
		p.reset(w)
		return
	case FaultServerError:
		writeError(w, http.StatusInternalServerError, "InternalError", "faultproxy: synthesized server error")
		return
	case FaultThrottle:
		writeError(w, http.StatusBadRequest, "ThrottlingException", "faultproxy: rate exceeded")
		return
	case FaultStall:
		t := time.NewTimer(p.cfg.StallFor)
		select {
		case <-t.C:
		case <-r.Context().Done():
		case <-p.done:
		}
		t.Stop()
		p.reset(w)
		return
	}
	if spike > 0 && spikeFirst {
		p.sleep(spike)
	}
	// Forwarded whole on a context of its own: a call on its way reaches the target even if
	// the client gave up meanwhile.
	ctx, cancel := context.WithTimeout(p.base, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, r.Method, p.cfg.Target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		p.reset(w)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		p.reset(w)
		return
	}
	answer, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	rec.Answered, rec.Status = time.Now(), resp.StatusCode
	if err != nil {
		p.reset(w)
		return
	}
	rec.Deliveries = deliveriesOf(rec.Op, answer)
	rec.Failed = failedOf(rec.Receipts, answer)
	p.sleep(back)
	if spike > 0 && !spikeFirst {
		p.sleep(spike)
	}
	switch f {
	case FaultResetAfter:
		p.reset(w)
		return
	case FaultTruncate:
		copyHeader(w.Header(), resp.Header)
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(resp.StatusCode)
		w.Write(answer[:len(answer)/2])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		p.reset(w)
		return
	}
	copyHeader(w.Header(), resp.Header)
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(resp.StatusCode)
	w.Write(answer)
}

// reset closes the client's connection abruptly (RST): the client sees a reset or EOF.
func (p *Proxy) reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		dst[k] = append([]string(nil), vs...)
	}
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.sqs#" + code, "message": msg})
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-query-error", code+";Sender")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// op is the SQS operation of a JSON-protocol request ("AmazonSQS.DeleteMessageBatch").
func op(r *http.Request) string {
	t := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(t, '.'); i >= 0 {
		return t[i+1:]
	}
	return t
}

// receiptsOf returns the receipt handles a request body names.
func receiptsOf(body []byte) []string {
	var in struct {
		ReceiptHandle string
		Entries       []struct{ ReceiptHandle string }
	}
	if json.Unmarshal(body, &in) != nil {
		return nil
	}
	var rs []string
	if in.ReceiptHandle != "" {
		rs = append(rs, in.ReceiptHandle)
	}
	for _, e := range in.Entries {
		if e.ReceiptHandle != "" {
			rs = append(rs, e.ReceiptHandle)
		}
	}
	return rs
}

func deliveriesOf(op string, answer []byte) []Delivery {
	if op != "ReceiveMessage" {
		return nil
	}
	var out struct {
		Messages []struct {
			MessageId     string
			ReceiptHandle string
			Attributes    map[string]string
		}
	}
	if json.Unmarshal(answer, &out) != nil {
		return nil
	}
	ds := make([]Delivery, 0, len(out.Messages))
	for _, m := range out.Messages {
		n, _ := strconv.Atoi(m.Attributes["ApproximateReceiveCount"])
		ds = append(ds, Delivery{MessageID: m.MessageId, Receipt: m.ReceiptHandle, ReceiveCount: n})
	}
	return ds
}

// failedOf returns the receipts whose entries a batch answer failed (ids are entry indexes,
// as adapters/sqs sends them).
func failedOf(receipts []string, answer []byte) []string {
	var out struct {
		Failed []struct{ Id string }
	}
	if json.Unmarshal(answer, &out) != nil {
		return nil
	}
	var rs []string
	for _, f := range out.Failed {
		if i, err := strconv.Atoi(f.Id); err == nil && i >= 0 && i < len(receipts) {
			rs = append(rs, receipts[i])
		}
	}
	return rs
}
