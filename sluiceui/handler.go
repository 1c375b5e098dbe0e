package sluiceui

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/core/runner"
)

// Action is what a request asks to do, as Options.Authorize sees it.
type Action string

// The actions.
const (
	ActionView   Action = "view"   // every GET page
	ActionRetry  Action = "retry"  // re-enqueue a dead job
	ActionCancel Action = "cancel" // cancel a job that is not terminal
	ActionPause  Action = "pause"  // pause a kind: its jobs start no attempt until resumed
	ActionResume Action = "resume" // resume a paused kind
)

// Options configure the handler. The zero value refuses every page and every action: a
// handler mounted without Authorize or PublicRead shows nothing.
type Options struct {
	// Authorize decides whether r may do a; a non-nil error refuses it (403, with the error's
	// text). It is called for every request, views included (unless PublicRead). nil: every
	// action is refused, and views too unless PublicRead.
	Authorize func(r *http.Request, a Action) error
	// PublicRead shows every page (payloads and errors included, after Redact) to whoever
	// reaches the handler, without calling Authorize for views; actions still need Authorize.
	PublicRead bool
	// Redact is called on every job before any page or download shows it: clear or rewrite
	// what must not be shown (a payload holding a secret, an error quoting one). It may change
	// Payload, LastErr, Unique and History[i].Err; nil shows jobs as journaled.
	Redact func(j *Job)
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
// Invariants: a GET never changes a job or a kind; either changes only on a POST that passed
// the same-origin check (http.CrossOriginProtection), carries the token of its confirmation
// page (bound to the action and the job id or kind) and was authorized for that action.
func New(src Source, opts Options) http.Handler {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	h := &handler{src: src, opts: opts, readOnly: opts.ReadOnly || src.ReadOnly(), pages: parsePages(),
		tokens: tokens{issued: map[string]tokenFor{}}}
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", h.view(h.overview))
	mux.HandleFunc("GET /jobs", h.view(h.jobs))
	mux.HandleFunc("GET /jobs/{id}", h.view(h.job))
	mux.HandleFunc("GET /jobs/{id}/field/{field}", h.download)
	mux.HandleFunc("GET /jobs/{id}/{action}", h.view(h.confirm))
	mux.HandleFunc("POST /jobs/{id}/{action}", h.act)
	mux.HandleFunc("GET /breakers", h.view(h.breakers))
	mux.HandleFunc("GET /schedules", h.view(h.schedules))
	mux.HandleFunc("GET /kinds", h.view(h.kinds))
	mux.HandleFunc("GET /kinds/{action}", h.view(h.confirmKind))
	mux.HandleFunc("POST /kinds/{action}", h.actKind)
	return secure(http.NewCrossOriginProtection().Handler(mux))
}

// secure sets the headers every response carries, assets and errors included: no framing, no
// content sniffing, nothing loaded, posted or based anywhere but here, nothing cached.
func secure(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

type handler struct {
	src      Source
	opts     Options
	readOnly bool
	pages    map[string]*template.Template
	tokens   tokens

	mu   sync.Mutex
	prev sample // the sample throughput is measured from
	rate rates
	// cen is the last census and hist the census of each minute of the last hour (charts).
	cen  *census
	hist []*census
	cmu  sync.Mutex // one census at a time
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
		p := &page{Root: rootOf(r.URL.Path), ReadOnly: h.readOnly, Now: h.opts.Now(), Flash: flashOf(r)}
		name, code, err := fn(w, r, p)
		if err != nil {
			h.fail(w, r, code, err)
			return
		}
		h.render(w, code, name, p)
	}
}

// flashOf is the "Done" banner an action's redirect asks for: only the name of an action.
func flashOf(r *http.Request) string {
	switch a := Action(r.URL.Query().Get("done")); a {
	case ActionRetry, ActionCancel, ActionPause, ActionResume:
		return string(a)
	}
	return ""
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
	switch {
	case a == ActionView && h.opts.PublicRead:
		return nil
	case h.opts.Authorize != nil:
		return h.opts.Authorize(r, a)
	case a == ActionView:
		return errors.New("sluice: pages are refused: sluiceui.New was given neither Options.Authorize " +
			"(to decide who may look) nor Options.PublicRead (to show them to everyone who reaches the handler)")
	}
	return errors.New("sluice: actions are refused: no Options.Authorize was given to sluiceui.New")
}

// may reports whether r may do a: the button for a refused action is not shown.
func (h *handler) may(r *http.Request, a Action) bool {
	_, err := h.permitted(r, a)
	return err == nil
}

// permitted is what every action passes, on its confirmation page and when performed: a
// source that may change, and Authorize. It returns the status of a refusal.
func (h *handler) permitted(r *http.Request, a Action) (int, error) {
	if h.readOnly {
		return http.StatusForbidden, ErrReadOnly
	}
	if err := h.authorize(r, a); err != nil {
		return http.StatusForbidden, err
	}
	return http.StatusOK, nil
}

// confirmed is permitted and the single-use token the confirmation page issued for a on
// subject; where names the page to confirm on again.
func (h *handler) confirmed(r *http.Request, a Action, subject, where string) (int, error) {
	if code, err := h.permitted(r, a); err != nil {
		return code, err
	}
	if !h.tokens.redeem(r.PostFormValue("token"), a, subject, h.opts.Now()) {
		return http.StatusBadRequest, fmt.Errorf("sluice: missing, used or expired confirmation token: open %s and confirm again", where)
	}
	return http.StatusOK, nil
}

func (h *handler) render(w http.ResponseWriter, code int, name string, p *page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
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
	Census   *census
	Charts   chartsData
	Rates    rates
	PerBatch float64
	Breakers []Breaker
	Paused   []string // the paused kinds
}

type stateCount struct {
	State string
	N     int
	Query string // the jobs page's state filter for it
}

func (h *handler) overview(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	st, err := h.src.Stats(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	c, hist, err := h.censusAt(r.Context(), p.Now)
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	paused, err := h.src.Paused(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	d := overviewData{Stats: st, Census: c, Charts: charts(c, hist), Rates: h.throughput(st, p.Now), Breakers: c.Breakers,
		Paused: paused}
	for _, s := range States {
		d.Counts = append(d.Counts, stateCount{State: s.String(), N: c.Total.States[s], Query: s.String()})
	}
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
	f.NoPayload = true
	pg, err := h.src.List(r.Context(), f)
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	for i := range pg.Jobs {
		h.redact(&pg.Jobs[i])
	}
	d := jobsData{Filter: f, State: stateParam(f.States), Page: pg}
	for _, s := range States {
		d.States = append(d.States, s.String())
	}
	if pg.More {
		next := url.Values{}
		if d.State != "" {
			next.Set("state", d.State)
		}
		for _, k := range []string{"kind", "target", "limit"} {
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

// stateListMax bounds the state parameter: every state's name once, with commas.
const stateListMax = 80

// filterOf reads a Filter from a query: state (a name, or several separated by commas, each
// at most once), kind, target, after, limit. Each is checked and bounded before anything is
// read, so a request's work does not grow with what it sends.
func filterOf(q url.Values) (Filter, error) {
	f := Filter{Kind: q.Get("kind"), Target: q.Get("target")}
	for _, v := range []struct{ name, val string }{{"kind", f.Kind}, {"target", f.Target}} {
		if len(v.val) > sluice.NameMax {
			return f, fmt.Errorf("sluice: %s of %d bytes: a name has at most %d", v.name, len(v.val), sluice.NameMax)
		}
	}
	states, err := ParseStates(q.Get("state"))
	if err != nil {
		return f, err
	}
	f.States = states
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return f, fmt.Errorf("sluice: after %s: want a job id", quote(v))
		}
		f.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > limitMax {
			return f, fmt.Errorf("sluice: limit %s: want 1 to %d", quote(v), limitMax)
		}
		f.Limit = n
	}
	return f, nil
}

// ParseStates reads a list of state names separated by commas ("dead,pending"): each a state,
// each at most once, the list at most as long as every name once. "" is no state.
func ParseStates(s string) ([]sluice.State, error) {
	if s == "" {
		return nil, nil
	}
	if len(s) > stateListMax {
		return nil, fmt.Errorf("sluice: state list of %d bytes: name each state at most once (pending, waiting, deferred, running, succeeded, dead, cancelled)", len(s))
	}
	var out []sluice.State
	for _, name := range strings.Split(s, ",") {
		st, ok := ParseState(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("sluice: state %s: want one of pending, waiting, deferred, running, succeeded, dead, cancelled", quote(name))
		}
		if slices.Contains(out, st) {
			return nil, fmt.Errorf("sluice: state %s is named twice: name each state once", st)
		}
		out = append(out, st)
	}
	return out, nil
}

// stateParam is states as the state parameter.
func stateParam(states []sluice.State) string {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = s.String()
	}
	return strings.Join(names, ",")
}

// quote is user input quoted for an error, cut when long.
func quote(s string) string { return runner.QuoteCut(s) }

// jobData is the job page's.
type jobData struct {
	Job              Job
	CanRetry, CanCel bool
	Waits            string // why it has not started (WaitReason)
	Blocked          string // what of flow control holds it back (Job.Blocked)
	Timeline         template.HTML
}

func (h *handler) job(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	j, code, err := h.lookup(r)
	if err != nil {
		return "", code, err
	}
	brs, err := h.src.Breakers(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	p.Title, p.Nav = fmt.Sprintf("Job %d", j.ID), "jobs"
	p.Data = jobData{Job: j, CanRetry: j.State == sluice.StateDead && h.may(r, ActionRetry),
		CanCel: !j.State.Terminal() && h.may(r, ActionCancel), Waits: WaitReason(j, brs, p.Now, !h.src.ReadOnly()),
		Blocked: j.Blocked, Timeline: attemptTimeline(j, p.Now)}
	return "job", http.StatusOK, nil
}

// redact applies Options.Redact to j.
func (h *handler) redact(j *Job) {
	if h.opts.Redact != nil {
		h.opts.Redact(j)
	}
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
	h.redact(&j)
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
	if code, err := h.permitted(r, a); err != nil {
		return "", code, err
	}
	j, code, err := h.lookup(r)
	if err != nil {
		return "", code, err
	}
	p.Title, p.Nav = fmt.Sprintf("%s job %d?", strings.ToUpper(string(a[:1]))+string(a[1:]), j.ID), "jobs"
	p.Data = confirmData{Job: j, Action: a, Token: h.tokens.issue(a, jobSubject(j.ID), p.Now)}
	return "confirm", http.StatusOK, nil
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
	if code, err := h.confirmed(r, a, jobSubject(id), "the job's page"); err != nil {
		return code, err
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

// schedulesData is the schedules page's.
type schedulesData struct {
	Schedules []sluice.ScheduleInfo
}

func (h *handler) schedules(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	scheds, err := h.src.Schedules(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	p.Title, p.Nav, p.Data = "Schedules", "schedules", schedulesData{Schedules: scheds}
	return "schedules", http.StatusOK, nil
}

// download serves one field of a job in full, as an attachment of plain bytes: what a page
// shows cut or escaped, as journaled (after Redact).
func (h *handler) download(w http.ResponseWriter, r *http.Request) {
	if err := h.authorize(r, ActionView); err != nil {
		h.fail(w, r, http.StatusForbidden, err)
		return
	}
	j, code, err := h.lookup(r)
	if err != nil {
		h.fail(w, r, code, err)
		return
	}
	var b []byte
	switch field := r.PathValue("field"); field {
	case "payload":
		b = j.Payload
	case "target":
		b = []byte(j.Target)
	case "kind":
		b = []byte(j.Kind)
	case "unique":
		b = []byte(j.Unique)
	case "error":
		b = []byte(j.LastErr)
	default:
		h.fail(w, r, http.StatusNotFound, fmt.Errorf("sluice: field %s: want payload, target, kind, unique or error", quote(field)))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="job-%d-%s.bin"`, j.ID, r.PathValue("field")))
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}
