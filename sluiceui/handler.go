package sluiceui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
)

// Action is what a request asks to do, as Options.Authorize sees it.
type Action string

// The actions.
const (
	ActionView   Action = "view"   // every GET page
	ActionRetry  Action = "retry"  // re-enqueue a dead job
	ActionCancel Action = "cancel" // cancel a job that is not terminal
)

// Options configure the handler. The zero value shows every page and refuses every action.
type Options struct {
	// Authorize decides whether r may do a; a non-nil error refuses it (403, with the error's
	// text). It is called for every request, views included. nil: views are allowed and
	// actions refused, so mounting the handler never lets a visitor change a job by default.
	Authorize func(r *http.Request, a Action) error
	// ReadOnly hides and refuses the actions whatever Authorize says (also implied by a
	// read-only Source).
	ReadOnly bool
	// Now is the clock used for cooldowns and throughput; default time.Now.
	Now func() time.Time
	// Logger receives one line per action performed or refused; default slog.Default().
	Logger *slog.Logger
}

//go:embed assets
var assets embed.FS

// New returns the UI over src as an http.Handler. Its links are relative, so it may be mounted
// under any prefix that ends in "/" (mux.Handle("/jobs/", http.StripPrefix("/jobs", h))).
//
// Invariants: a GET never changes a job; a job changes only on a POST that passed the
// same-origin check (http.CrossOriginProtection), carries the token of its confirmation page
// (bound to the action and the job id) and was authorized for that action.
func New(src Source, opts Options) http.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &handler{src: src, opts: opts, readOnly: opts.ReadOnly || src.ReadOnly(), pages: parsePages()}
	if _, err := rand.Read(h.key[:]); err != nil {
		panic(fmt.Sprintf("sluiceui: reading random key: %v", err))
	}
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", h.view(h.overview))
	mux.HandleFunc("GET /jobs", h.view(h.jobs))
	mux.HandleFunc("GET /jobs/{id}", h.view(h.job))
	mux.HandleFunc("GET /jobs/{id}/{action}", h.view(h.confirm))
	mux.HandleFunc("POST /jobs/{id}/{action}", h.act)
	mux.HandleFunc("GET /breakers", h.view(h.breakers))
	return http.NewCrossOriginProtection().Handler(mux)
}

type handler struct {
	src      Source
	opts     Options
	readOnly bool
	pages    map[string]*template.Template
	key      [32]byte // signs confirmation tokens

	mu   sync.Mutex
	prev sample // the sample throughput is measured from
	rate rates
}

// sample is the journal's counters at one moment.
type sample struct {
	at               time.Time
	commits, records int64
}

// rates is the journal's throughput between two samples at least a second apart.
type rates struct {
	Known            bool
	Records, Batches float64 // per second
	Over             time.Duration
}

// page is what every template gets.
type page struct {
	Root     string // the relative path to the handler's root ("./", "../", ...)
	Title    string
	Nav      string
	ReadOnly bool
	Now      time.Time
	Flash    string
	Data     any
}

func (h *handler) view(fn func(w http.ResponseWriter, r *http.Request, p *page) (string, int, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.authorize(r, ActionView); err != nil {
			h.fail(w, r, http.StatusForbidden, err)
			return
		}
		p := &page{Root: rootOf(r.URL.Path), ReadOnly: h.readOnly, Now: h.opts.Now(), Flash: r.URL.Query().Get("done")}
		name, code, err := fn(w, r, p)
		if err != nil {
			h.fail(w, r, code, err)
			return
		}
		h.render(w, code, name, p)
	}
}

// rootOf is the relative path from the page at path back to the handler's root.
func rootOf(path string) string {
	n := strings.Count(strings.TrimPrefix(path, "/"), "/")
	if n == 0 {
		return "./"
	}
	return strings.Repeat("../", n)
}

func (h *handler) authorize(r *http.Request, a Action) error {
	if h.opts.Authorize != nil {
		return h.opts.Authorize(r, a)
	}
	if a == ActionView {
		return nil
	}
	return errors.New("sluice: actions are refused: no Options.Authorize was given to sluiceui.New")
}

func (h *handler) render(w http.ResponseWriter, code int, name string, p *page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	w.WriteHeader(code)
	if err := h.pages[name].ExecuteTemplate(w, "layout", p); err != nil {
		h.opts.Logger.Error("sluiceui: rendering page", "page", name, "err", err)
	}
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, code int, err error) {
	p := &page{Root: rootOf(r.URL.Path), Title: http.StatusText(code), ReadOnly: h.readOnly, Now: h.opts.Now(),
		Data: map[string]any{"Code": code, "Err": err.Error()}}
	h.render(w, code, "error", p)
}

// overviewData is the overview page's.
type overviewData struct {
	Stats    sluice.Stats
	Counts   []stateCount
	Rates    rates
	PerBatch float64
	Breakers []Breaker
}

type stateCount struct {
	State string
	N     int
}

func (h *handler) overview(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	st, err := h.src.Stats(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	brs, err := h.src.Breakers(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	d := overviewData{Stats: st, Rates: h.throughput(st, p.Now), Breakers: brs, Counts: []stateCount{
		{"waiting", st.Waiting}, {"deferred", st.Deferred}, {"running", st.Running},
		{"succeeded", st.Succeeded}, {"dead", st.Dead}, {"cancelled", st.Cancelled}}}
	if st.Commits > 0 {
		d.PerBatch = float64(st.Records) / float64(st.Commits)
	}
	p.Title, p.Nav, p.Data = "Overview", "overview", d
	return "overview", http.StatusOK, nil
}

// throughput measures records and batches per second between samples at least a second apart.
func (h *handler) throughput(st sluice.Stats, now time.Time) rates {
	h.mu.Lock()
	defer h.mu.Unlock()
	cur := sample{at: now, commits: st.Commits, records: st.Records}
	switch el := now.Sub(h.prev.at); {
	case h.prev.at.IsZero() || cur.records < h.prev.records || el < 0:
		h.prev = cur
	case el >= time.Second:
		s := el.Seconds()
		h.rate = rates{Known: true, Over: el.Round(time.Millisecond),
			Records: float64(cur.records-h.prev.records) / s, Batches: float64(cur.commits-h.prev.commits) / s}
		h.prev = cur
	}
	return h.rate
}

// jobsData is the jobs page's.
type jobsData struct {
	Filter  Filter
	State   string // the state filter as given
	Page    Page
	NextURL string
	States  []string
}

func (h *handler) jobs(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	q := r.URL.Query()
	f, err := filterOf(q)
	if err != nil {
		return "", http.StatusBadRequest, err
	}
	pg, err := h.src.List(r.Context(), f)
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	d := jobsData{Filter: f, State: q.Get("state"), Page: pg}
	for _, s := range States {
		d.States = append(d.States, s.String())
	}
	if pg.More {
		next := url.Values{}
		for _, k := range []string{"state", "kind", "target", "limit"} {
			if v := q.Get(k); v != "" {
				next.Set(k, v)
			}
		}
		next.Set("after", strconv.FormatUint(pg.Next, 10))
		d.NextURL = "jobs?" + next.Encode()
	}
	p.Title, p.Nav, p.Data = "Jobs", "jobs", d
	return "jobs", http.StatusOK, nil
}

// filterOf reads a Filter from a query: state (a name, or several separated by commas), kind,
// target, after, limit.
func filterOf(q url.Values) (Filter, error) {
	f := Filter{Kind: q.Get("kind"), Target: q.Get("target")}
	if s := q.Get("state"); s != "" {
		for _, name := range strings.Split(s, ",") {
			st, ok := ParseState(strings.TrimSpace(name))
			if !ok {
				return f, fmt.Errorf("sluice: state %q: want one of pending, waiting, deferred, running, succeeded, dead, cancelled", name)
			}
			f.States = append(f.States, st)
		}
	}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return f, fmt.Errorf("sluice: after %q: want a job id", v)
		}
		f.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > limitMax {
			return f, fmt.Errorf("sluice: limit %q: want 1 to %d", v, limitMax)
		}
		f.Limit = n
	}
	return f, nil
}

// jobData is the job page's.
type jobData struct {
	Job              Job
	CanRetry, CanCel bool
}

func (h *handler) job(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	j, code, err := h.lookup(r)
	if err != nil {
		return "", code, err
	}
	p.Title, p.Nav = fmt.Sprintf("Job %d", j.ID), "jobs"
	p.Data = jobData{Job: j, CanRetry: !h.readOnly && j.State == sluice.StateDead,
		CanCel: !h.readOnly && !j.State.Terminal()}
	return "job", http.StatusOK, nil
}

func (h *handler) lookup(r *http.Request) (Job, int, error) {
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		return Job{}, http.StatusBadRequest, fmt.Errorf("sluice: job id %q: want a number", r.PathValue("id"))
	}
	j, err := h.src.Get(r.Context(), id)
	if errors.Is(err, sluice.ErrNotFound) {
		return Job{}, http.StatusNotFound, err
	}
	if err != nil {
		return Job{}, http.StatusInternalServerError, err
	}
	return j, http.StatusOK, nil
}

func actionOf(r *http.Request) (Action, error) {
	switch a := Action(r.PathValue("action")); a {
	case ActionRetry, ActionCancel:
		return a, nil
	}
	return "", fmt.Errorf("sluice: action %q: want retry or cancel", r.PathValue("action"))
}

// confirmData is the confirmation page's.
type confirmData struct {
	Job    Job
	Action Action
	Token  string
}

func (h *handler) confirm(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	a, err := actionOf(r)
	if err != nil {
		return "", http.StatusNotFound, err
	}
	if h.readOnly {
		return "", http.StatusForbidden, ErrReadOnly
	}
	if err := h.authorize(r, a); err != nil {
		return "", http.StatusForbidden, err
	}
	j, code, err := h.lookup(r)
	if err != nil {
		return "", code, err
	}
	p.Title, p.Nav = fmt.Sprintf("%s job %d?", strings.ToUpper(string(a[:1]))+string(a[1:]), j.ID), "jobs"
	p.Data = confirmData{Job: j, Action: a, Token: h.token(a, j.ID)}
	return "confirm", http.StatusOK, nil
}

// token binds a confirmation to one action on one job, for this handler's lifetime.
func (h *handler) token(a Action, id uint64) string {
	m := hmac.New(sha256.New, h.key[:])
	fmt.Fprintf(m, "%s:%d", a, id)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	a, err := actionOf(r)
	if err != nil {
		h.fail(w, r, http.StatusNotFound, err)
		return
	}
	id, err := strconv.ParseUint(r.PathValue("id"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, fmt.Errorf("sluice: job id %q: want a number", r.PathValue("id")))
		return
	}
	log := h.opts.Logger.With("action", string(a), "job", id, "remote", r.RemoteAddr)
	code, err := h.perform(r, a, id)
	if err != nil {
		log.Warn("sluiceui: action refused", "err", err)
		h.fail(w, r, code, err)
		return
	}
	log.Info("sluiceui: action done")
	// A relative Location (http.Redirect would make it absolute, dropping a mount prefix).
	w.Header().Set("Location", fmt.Sprintf("../%d?done=%s", id, a))
	w.WriteHeader(http.StatusSeeOther)
}

func (h *handler) perform(r *http.Request, a Action, id uint64) (int, error) {
	if h.readOnly {
		return http.StatusForbidden, ErrReadOnly
	}
	if err := h.authorize(r, a); err != nil {
		return http.StatusForbidden, err
	}
	if !hmac.Equal([]byte(r.PostFormValue("token")), []byte(h.token(a, id))) {
		return http.StatusBadRequest, errors.New("sluice: missing or stale confirmation token: open the job's page and confirm again")
	}
	var err error
	if a == ActionRetry {
		err = h.src.Retry(r.Context(), id)
	} else {
		err = h.src.Cancel(r.Context(), id)
	}
	switch {
	case err == nil:
		return http.StatusOK, nil
	case errors.Is(err, sluice.ErrNotFound):
		return http.StatusNotFound, err
	case errors.Is(err, sluice.ErrNotDead), errors.Is(err, sluice.ErrTerminal):
		return http.StatusConflict, err
	}
	return http.StatusInternalServerError, err
}

// breakersData is the breakers page's.
type breakersData struct {
	Breakers []Breaker
	Live     bool // the source is a live runner (a directory holds no breaker state)
}

func (h *handler) breakers(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	brs, err := h.src.Breakers(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	p.Title, p.Nav, p.Data = "Breakers", "breakers", breakersData{Breakers: brs, Live: !h.src.ReadOnly()}
	return "breakers", http.StatusOK, nil
}
