package sluiceui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// The UI under hostile input: every request's work is bounded by what the handler allows,
// not by what the request sends; every string is shown escaped and cut; nothing is shown to
// a visitor the options did not let in.

// bigSource is a Source of n jobs whose target, kind, unique key, error and payload are each
// size bytes (journals written before names were bounded hold such names; payloads and
// errors may be this large today). It counts List calls.
type bigSource struct {
	jobs  []sluiceui.Job
	lists int
}

func newBigSource(n, size int) *bigSource {
	s := &bigSource{}
	long := strings.Repeat("\x1b[31m<b>x</b>", size/13+1)[:size]
	for i := range n {
		s.jobs = append(s.jobs, sluiceui.Job{ID: uint64(i + 1), Kind: long, Target: long, Unique: long, LastErr: long,
			Payload: []byte(long), State: sluice.StateDead, Attempts: 1, Reason: sluice.ReasonPermanent,
			History: []sluice.Attempt{{Number: 1, Start: time.Unix(1e9, 0), End: time.Unix(1e9+2, 0), Outcome: "failed", Err: long}}})
	}
	return s
}

func (s *bigSource) Stats(context.Context) (sluice.Stats, error) {
	return sluice.Stats{Dead: len(s.jobs), LastID: uint64(len(s.jobs))}, nil
}
func (s *bigSource) List(_ context.Context, f sluiceui.Filter) (sluiceui.Page, error) {
	s.lists++
	var p sluiceui.Page
	for _, j := range s.jobs {
		if j.ID > f.After {
			p.Jobs = append(p.Jobs, j)
			p.Next = j.ID
		}
	}
	return p, nil
}
func (s *bigSource) Get(_ context.Context, id uint64) (sluiceui.Job, error) {
	if id == 0 || id > uint64(len(s.jobs)) {
		return sluiceui.Job{}, sluice.ErrNotFound
	}
	return s.jobs[id-1], nil
}
func (s *bigSource) Breakers(context.Context) ([]sluiceui.Breaker, error) {
	return []sluiceui.Breaker{{Target: s.jobs[0].Target, State: "open", Until: time.Unix(2e9, 0)}}, nil
}
func (s *bigSource) Schedules(context.Context) ([]sluice.ScheduleInfo, error) {
	t := s.jobs[0].Target
	return []sluice.ScheduleInfo{{Name: t, Spec: t, Kind: t, Target: t}}, nil
}
func (s *bigSource) Retry(context.Context, uint64) error      { return nil }
func (s *bigSource) Cancel(context.Context, uint64) error     { return nil }
func (s *bigSource) Paused(context.Context) ([]string, error) { return []string{s.jobs[0].Target}, nil }
func (s *bigSource) Pause(context.Context, string) error      { return nil }
func (s *bigSource) Resume(context.Context, string) error     { return nil }
func (s *bigSource) ReadOnly() bool                           { return false }

// TestHostileQueriesAreRefusedBeforeAnyRead: a state list of a megabyte (dead, 200,000
// times), a state named twice, names over NameMax and a long cursor are refused with a 400
// that quotes them cut, before the source is read. It took 8.8 to 11.6 s against 100,000 jobs
// and held up every enqueue meanwhile.
func TestHostileQueriesAreRefusedBeforeAnyRead(t *testing.T) {
	src := newBigSource(1, 10)
	h := sluiceui.New(src, sluiceui.Options{Logger: quiet, PublicRead: true})
	long := strings.Repeat("k", sluice.NameMax+1)
	for _, q := range []string{
		"state=" + strings.Repeat("dead,", 200_000),
		"state=dead,dead",
		"state=" + strings.Repeat("x", 1000),
		"state=dead" + strings.Repeat("%20", 100_000) + ",pending", // two states, 100 KB
		"kind=" + long,
		"target=" + long,
		"after=" + strings.Repeat("9", 100_000),
		"limit=" + strings.Repeat("9", 100_000),
	} {
		start := time.Now()
		code, body := get(t, h, "/jobs?"+q)
		if took := time.Since(start); code != 400 || len(body) > 8<<10 || took > time.Second {
			t.Errorf("GET /jobs?%.40s… = %d, %d bytes, %v; want 400, short, quick:\n%.2000s", q, code, len(body), took, body)
		}
	}
	if src.lists != 0 {
		t.Errorf("refused queries read the source %d times", src.lists)
	}
	if code, _ := get(t, h, "/jobs?state=dead,pending,waiting,deferred,running,succeeded,cancelled"); code != 200 {
		t.Errorf("every state once = %d, want 200", code)
	}
}

// TestLongStringsAreCutOnPages: 64 jobs whose every string is 1 MiB made a 98.6 MB jobs page
// (Chromium took 31 s to 1 m 52 s on one such job). Pages now show each string cut, with its
// length, escaped; the job page offers the full value as a download.
func TestLongStringsAreCutOnPages(t *testing.T) {
	src := newBigSource(64, 1<<20)
	h := sluiceui.New(src, sluiceui.Options{Logger: quiet, Authorize: allowAll})
	for _, tc := range []struct {
		path string
		max  int
	}{{"/jobs", 200 << 10}, {"/jobs/1", 80 << 10}, {"/", 200 << 10}, {"/breakers", 20 << 10},
		{"/schedules", 20 << 10}, {"/jobs/1/retry", 20 << 10}, {"/kinds", 200 << 10}} {
		code, body := get(t, h, tc.path)
		if code != 200 || len(body) > tc.max || !utf8.ValidString(body) {
			t.Errorf("GET %s = %d, %d bytes (valid UTF-8 %v); want 200, at most %d", tc.path, code, len(body), utf8.ValidString(body), tc.max)
		}
		if strings.Contains(body, "\x1b") || strings.Contains(body, "<b>x") {
			t.Errorf("GET %s shows a raw escape or tag", tc.path)
		}
		if tc.path != "/" && !strings.Contains(body, `<span class="esc">\x1b</span>`) {
			t.Errorf("GET %s does not show ESC as a visible escape", tc.path)
		}
	}
	_, body := get(t, h, "/jobs/1")
	if !strings.Contains(body, "(1048576 bytes)") || !strings.Contains(body, `href="1/field/payload"`) {
		t.Errorf("job page does not state the full length or offer the download")
	}
	for _, field := range []string{"payload", "target", "kind", "unique", "error"} {
		rec := getRec(t, h, "/jobs/1/field/"+field, nil)
		if rec.Code != 200 || rec.Body.Len() != 1<<20 || rec.Header().Get("Content-Type") != "application/octet-stream" ||
			!strings.HasPrefix(rec.Header().Get("Content-Disposition"), "attachment;") {
			t.Errorf("download %s = %d, %d bytes, %q, %q; want the 1 MiB value as an attachment", field, rec.Code, rec.Body.Len(),
				rec.Header().Get("Content-Type"), rec.Header().Get("Content-Disposition"))
		}
	}
	if rec := getRec(t, h, "/jobs/1/field/secret", nil); rec.Code != 404 {
		t.Errorf("download of an unknown field = %d, want 404", rec.Code)
	}
}

func getRec(t *testing.T, h http.Handler, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	h.ServeHTTP(rec, req)
	return rec
}

// TestViewsNeedAuthorizeOrPublicRead: by default every page and download is refused (it was
// open to whoever reached the handler, payloads included); Authorize decides views too;
// PublicRead opens views only.
func TestViewsNeedAuthorizeOrPublicRead(t *testing.T) {
	r, _ := testjournal.Open(t)
	src := sluiceui.FromRunner(r.Runner)
	paths := []string{"/", "/jobs", "/jobs/2", "/jobs/2/field/payload", "/breakers", "/schedules", "/kinds"}
	closed := sluiceui.New(src, sluiceui.Options{Logger: quiet})
	for _, p := range paths {
		if code, body := get(t, closed, p); code != 403 || !strings.Contains(body, "PublicRead") || strings.Contains(body, "bad-1") {
			t.Errorf("GET %s with zero Options = %d, want 403 naming PublicRead and no job data", p, code)
		}
	}
	views := 0
	counting := sluiceui.New(src, sluiceui.Options{Logger: quiet, Authorize: func(_ *http.Request, a sluiceui.Action) error {
		if a == sluiceui.ActionView {
			views++
			return nil
		}
		return fmt.Errorf("no")
	}})
	public := sluiceui.New(src, sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, p := range paths {
		if code, _ := get(t, counting, p); code != 200 {
			t.Errorf("GET %s authorized = %d, want 200", p, code)
		}
		if code, _ := get(t, public, p); code != 200 {
			t.Errorf("GET %s with PublicRead = %d, want 200", p, code)
		}
	}
	if views != len(paths) {
		t.Errorf("Authorize saw %d views, want %d", views, len(paths))
	}
	if code, _ := get(t, public, "/jobs/2/retry"); code != 403 {
		t.Errorf("PublicRead opened the retry confirmation: %d, want 403", code)
	}
}

// TestRedactHidesPayloadsAndErrors: Options.Redact sees every job before a page or a
// download shows it.
func TestRedactHidesPayloadsAndErrors(t *testing.T) {
	r, _ := testjournal.Open(t)
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true, Redact: func(j *sluiceui.Job) {
		j.Payload = []byte("[redacted]")
		j.LastErr = "[redacted]"
		for i := range j.History {
			j.History[i].Err = "[redacted]"
		}
	}})
	for _, p := range []string{"/jobs", "/jobs/2", "/jobs/2/field/payload", "/jobs/2/field/error", "/jobs?state=dead"} {
		code, body := get(t, h, p)
		if code != 200 || strings.Contains(body, "bad-1") || strings.Contains(body, "smtp 550") {
			t.Errorf("GET %s = %d and shows the payload or the error:\n%.3000s", p, code, body)
		}
	}
	if _, body := get(t, h, "/jobs/2"); !strings.Contains(body, "[redacted]") {
		t.Errorf("job page does not show the redacted values")
	}
}

// TestHeadersOnEveryResponse: pages, assets, errors, downloads and redirects carry nosniff,
// no framing, and a CSP that confines forms and the base URL.
func TestHeadersOnEveryResponse(t *testing.T) {
	r, _ := testjournal.Open(t)
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, p := range []string{"/", "/jobs/2", "/assets/style.css", "/jobs/99", "/nowhere", "/jobs/2/field/payload"} {
		rec := getRec(t, h, p, nil)
		hd := rec.Header()
		csp := hd.Get("Content-Security-Policy")
		if hd.Get("X-Content-Type-Options") != "nosniff" || hd.Get("X-Frame-Options") != "DENY" ||
			!strings.Contains(csp, "form-action 'self'") || !strings.Contains(csp, "base-uri 'none'") ||
			!strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("GET %s (%d) headers: %v", p, rec.Code, hd)
		}
	}
}

// TestDoneShowsOnlyAnActionsName: ?done= rendered any text as a "Done:" banner.
func TestDoneShowsOnlyAnActionsName(t *testing.T) {
	r, _ := testjournal.Open(t)
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})
	if _, body := get(t, h, "/jobs/2?done="+url.QueryEscape("your account is suspended, call 555")); strings.Contains(body, "flash") {
		t.Errorf("arbitrary ?done= text shown as a banner")
	}
	if _, body := get(t, h, "/jobs/2?done=retry"); !strings.Contains(body, "Done: retry.") {
		t.Errorf("?done=retry shows no banner")
	}
}

// TestTokensExpire: a confirmation token is good for ten minutes; at most 1,024 wait at once.
func TestTokensExpire(t *testing.T) {
	r, _ := testjournal.Open(t)
	now := time.Now()
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, Authorize: allowAll,
		Now: func() time.Time { return now }})
	_, body := get(t, h, "/jobs/2/retry")
	tok := token(t, body)
	now = now.Add(10*time.Minute + time.Second)
	if rec := post(t, h, "/jobs/2/retry", url.Values{"token": {tok}}, nil); rec.Code != 400 {
		t.Errorf("expired token = %d, want 400", rec.Code)
	}
	_, body = get(t, h, "/jobs/2/retry")
	first := token(t, body)
	for range 1024 {
		get(t, h, "/jobs/2/cancel")
	}
	if rec := post(t, h, "/jobs/2/retry", url.Values{"token": {first}}, nil); rec.Code != 400 {
		t.Errorf("a token pushed out by 1,024 newer ones = %d, want 400", rec.Code)
	}
	if j, _ := r.Get(context.Background(), 2); j.State != sluice.StateDead {
		t.Errorf("job 2 = %v, want dead", j.State)
	}
}
