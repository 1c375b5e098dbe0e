package sluiceui_test

import (
	"context"
	"errors"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/adapters/osfs"
	"github.com/sluicehq/sluice/core/runner"
	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// flowDir leaves a stopped directory whose jobs flow control holds back, written through
// core's engine (the root package's WithHoldOnDead is the kind's, and a test of it belongs
// there):
//
//	1 seq, sequence "s", Hold, dead: it holds its sequence
//	2 seq, sequence "s", waiting: held by dead job 1
//	3 mail, key "k", waiting: kind mail is paused
//	4 seq, sequence "t", waiting, the head of its sequence: nothing holds it
//	5 seq, sequence "t", waiting: held by job 4
func flowDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	fsys, err := osfs.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	now := time.Now()
	e, err := runner.Open(fsys, "jobs.journal", runner.Config{Capacity: 2, Logger: quiet}, now)
	if err != nil {
		t.Fatal(err)
	}
	later := now.Add(time.Hour) // jobs 2, 4 and 5 do not start
	for _, nj := range []runner.NewJob{
		{Due: now, Opts: runner.Opts{Kind: "seq", Group: "s", Hold: true}},
		{Due: later, Opts: runner.Opts{Kind: "seq", Group: "s", Hold: true}},
		{Due: now, Opts: runner.Opts{Kind: "mail", Key: "k"}},
		{Due: later, Opts: runner.Opts{Kind: "seq", Group: "t"}},
		{Due: later, Opts: runner.Opts{Kind: "seq", Group: "t"}},
	} {
		nj.Target, nj.Payload = "x.example", []byte(`"p"`)
		if _, _, err := e.EnqueueJob(now, nj); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Pause(now, "mail"); err != nil {
		t.Fatal(err)
	}
	if err := e.Dispatch(now, true); err != nil {
		t.Fatal(err)
	}
	res, err := e.Commit(now)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Starts) != 1 || res.Starts[0].Token.ID != 1 {
		t.Fatalf("started %+v, want job 1 alone", res.Starts)
	}
	if err := e.AttemptDone(now, res.Starts[0].Token, runner.Outcome{Kind: runner.OutcomeFailed, Err: "refused"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Commit(now); err != nil {
		t.Fatal(err)
	}
	if j, _ := e.Get(1); j.State != runner.Dead {
		t.Fatalf("job 1 is %v, want dead", j.State)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDirSourceSaysWhatHoldsAJob: a directory's source knows the paused kinds and, per
// waiting job, its key, its sequence and what of them holds it back, from the journal alone.
func TestDirSourceSaysWhatHoldsAJob(t *testing.T) {
	src, err := sluiceui.FromDir(flowDir(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	paused, err := src.Paused(ctx)
	if err != nil || !cmp.Equal(paused, []string{"mail"}) {
		t.Errorf("Paused = %q, %v; want [mail]", paused, err)
	}
	want := map[uint64]string{
		1: "",
		2: `sequence "s" is held by dead job 1 (retry or cancel it)`,
		3: "its kind is paused",
		4: "",
		5: `sequence "t" is held by job 4`,
	}
	for id, w := range want {
		j, err := src.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.Blocked != w {
			t.Errorf("job %d (%v) Blocked = %q, want %q", id, j.State, j.Blocked, w)
		}
	}
	if j, _ := src.Get(ctx, 3); j.Key != "k" || j.KeyRunning != 0 {
		t.Errorf("job 3 Key %q KeyRunning %d, want k and 0", j.Key, j.KeyRunning)
	}
	if j, _ := src.Get(ctx, 2); j.Group != "s" || !j.Hold {
		t.Errorf("job 2 Group %q Hold %v, want s and true", j.Group, j.Hold)
	}
	if err := src.Pause(ctx, "seq"); !errors.Is(err, sluiceui.ErrReadOnly) {
		t.Errorf("Pause on a directory = %v, want ErrReadOnly", err)
	}

	h := sluiceui.New(src, sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, tc := range []struct {
		path string
		has  []string
		not  []string
	}{
		{"/", []string{`id="paused"`, ">mail</a>"}, nil},
		{"/jobs/2", []string{`<td id="blocked">sequence &#34;s&#34; is held by dead job 1 (retry or cancel it)</td>`, `<td id="group">s`}, nil},
		{"/jobs/3", []string{`<td id="blocked">its kind is paused</td>`, `<td id="key">k (0 of its attempts running`}, nil},
		{"/jobs/4", nil, []string{`id="blocked"`}},
		{"/kinds", []string{`<tr data-kind="mail">`, `<td class="paused">paused</td>`, `<tr data-kind="seq">`}, []string{"Pause…", "Resume…"}},
	} {
		code, body := get(t, h, tc.path)
		if code != 200 {
			t.Errorf("GET %s = %d:\n%s", tc.path, code, body)
		}
		for _, s := range tc.has {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s lacks %q:\n%s", tc.path, s, body)
			}
		}
		for _, s := range tc.not {
			if strings.Contains(body, s) {
				t.Errorf("GET %s has %q:\n%s", tc.path, s, body)
			}
		}
	}
	if code, _ := get(t, h, "/kinds/pause?kind=seq"); code != 403 {
		t.Errorf("pause confirmation on a directory = %d, want 403", code)
	}
}

// TestRunnerSourceShowsFlowOptions: a live runner's jobs carry their key and sequence to the
// UI as a directory's do.
func TestRunnerSourceShowsFlowOptions(t *testing.T) {
	r, _ := testjournal.Open(t)
	ctx := context.Background()
	id, err := r.Enqueue(ctx, time.Now().Add(time.Hour), "x.example", "p", sluice.WithKey("acme"), sluice.WithGroup("s"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := sluiceui.FromRunner(r.Runner).Get(ctx, id)
	if err != nil || j.Key != "acme" || j.Group != "s" {
		t.Fatalf("Get(%d) = key %q, group %q, %v; want acme, s", id, j.Key, j.Group, err)
	}
	code, body := get(t, sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true}), fmt.Sprintf("/jobs/%d", id))
	if code != 200 || !strings.Contains(body, `<td id="key">acme`) || !strings.Contains(body, `<td id="group">s`) {
		t.Errorf("GET /jobs/%d = %d without the key and the sequence:\n%s", id, code, body)
	}
}

// pausedIn is what the journal in dir says is paused (read beside the live runner).
func pausedIn(t *testing.T, dir string) []string {
	t.Helper()
	src, err := sluiceui.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.Paused(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKindPauseNeedsAuthorizeTokenAndSameOrigin: pause and resume are actions like retry: a
// refused request (not authorized, no token, a token for another kind or action, cross-site)
// changes nothing, durably checked in the journal; a confirmed one pauses, then resumes.
func TestKindPauseNeedsAuthorizeTokenAndSameOrigin(t *testing.T) {
	r, dir := testjournal.Open(t)
	kind := sluice.DefaultKind
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, Authorize: func(req *http.Request, a sluiceui.Action) error {
		if a != sluiceui.ActionView && req.Header.Get("X-Admin") == "" {
			return errors.New("only admins")
		}
		return nil
	}})
	admin := map[string]string{"X-Admin": "1"}
	confirm := func(a, k string) string {
		t.Helper()
		req := httptest.NewRequest("GET", "/kinds/"+a+"?kind="+url.QueryEscape(k), nil)
		req.Header.Set("X-Admin", "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("confirm page = %d:\n%s", rec.Code, rec.Body)
		}
		return token(t, rec.Body.String())
	}
	if _, body := get(t, h, "/kinds"); strings.Contains(body, "Pause…") || !strings.Contains(body, `<tr data-kind="default">`) {
		t.Errorf("kinds page shows a pause link to a visitor who may not pause, or lacks the kind:\n%s", body)
	}
	if code, _ := get(t, h, "/kinds/pause?kind=default"); code != 403 {
		t.Errorf("pause confirmation without authorization = %d, want 403", code)
	}
	tok := confirm("pause", kind)
	for _, tc := range []struct {
		name string
		path string
		form url.Values
		hdr  map[string]string
		code int
	}{
		{"not authorized", "/kinds/pause?kind=default", url.Values{"token": {tok}}, nil, 403},
		{"no token", "/kinds/pause?kind=default", nil, admin, 400},
		{"token of another kind", "/kinds/pause?kind=other", url.Values{"token": {tok}}, admin, 400},
		{"kind in the form, not the URL", "/kinds/pause", url.Values{"kind": {kind}, "token": {tok}}, admin, 400},
		{"token of another action", "/kinds/resume?kind=default", url.Values{"token": {tok}}, admin, 400},
		{"cross-site", "/kinds/pause?kind=default", url.Values{"token": {tok}}, map[string]string{"X-Admin": "1", "Sec-Fetch-Site": "cross-site"}, 403},
		{"unknown action", "/kinds/stop?kind=default", url.Values{"token": {tok}}, admin, 404},
		{"a job's token", "/kinds/pause?kind=4", url.Values{"token": {jobToken(t, h)}}, admin, 400},
	} {
		if rec := post(t, h, tc.path, tc.form, tc.hdr); rec.Code != tc.code {
			t.Errorf("%s: POST %s = %d, want %d:\n%s", tc.name, tc.path, rec.Code, tc.code, rec.Body)
		}
	}
	if p := pausedIn(t, dir); len(p) != 0 {
		t.Fatalf("paused after refused requests: %q", p)
	}

	// The confirmation's own form, as a browser submits it.
	req := httptest.NewRequest("GET", "/kinds/pause?kind=default", nil)
	req.Header.Set("X-Admin", "1")
	page := httptest.NewRecorder()
	h.ServeHTTP(page, req)
	m := regexp.MustCompile(`<form method="post" action="([^"]+)"`).FindStringSubmatch(page.Body.String())
	if m == nil || html.UnescapeString(m[1]) != "pause?kind=default" {
		t.Fatalf("the confirmation's form action = %q, want pause?kind=default", m)
	}
	rec := post(t, h, "/kinds/"+html.UnescapeString(m[1]), url.Values{"token": {token(t, page.Body.String())}}, admin)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "../kinds?done=pause" {
		t.Fatalf("POST pause = %d Location %q, want 303 ../kinds?done=pause:\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	if p := pausedIn(t, dir); !cmp.Equal(p, []string{kind}) {
		t.Errorf("paused after the pause = %q, want [%s]", p, kind)
	}
	// The live pages say so: the kind's row offers Resume, its waiting job says why.
	if _, body := get(t, h, "/kinds"); !strings.Contains(body, `<td class="paused">paused</td>`) || strings.Contains(body, "Pause…") {
		t.Errorf("kinds page of the live runner after the pause:\n%s", body)
	}
	if _, body := get(t, h, "/jobs/4"); !strings.Contains(body, `<td id="blocked">its kind is paused</td>`) {
		t.Errorf("job 4's page of the live runner does not say its kind is paused:\n%s", body)
	}
	rec = post(t, h, "/kinds/resume?kind=default", url.Values{"token": {confirm("resume", kind)}}, admin)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("POST resume = %d:\n%s", rec.Code, rec.Body)
	}
	if p := pausedIn(t, dir); len(p) != 0 {
		t.Errorf("paused after the resume = %q, want none", p)
	}
	rec = post(t, h, "/kinds/pause?kind=nope", url.Values{"token": {confirm("pause", "nope")}}, admin)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "no such kind") {
		t.Errorf("pause of an unknown kind = %d, want 404 naming it:\n%s", rec.Code, rec.Body)
	}
}

// jobToken is a confirmation token for cancelling job 4 (for the kind form: it must not pass).
func jobToken(t *testing.T, h http.Handler) string {
	t.Helper()
	req := httptest.NewRequest("GET", "/jobs/4/cancel", nil)
	req.Header.Set("X-Admin", "1")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return token(t, rec.Body.String())
}

// TestKindsPagesShowHostileNamesEscaped: kinds named by markup, terminal escapes, bidi
// overrides and invalid UTF-8 reach the kinds page and the pause confirmation as text: no
// raw control byte, no element made of a name.
func TestKindsPagesShowHostileNamesEscaped(t *testing.T) {
	r, _ := testjournal.OpenHostile(t)
	h := sluiceui.New(sluiceui.FromRunner(r), sluiceui.Options{Logger: quiet, Authorize: allowAll})
	paths := []string{"/kinds"}
	for _, k := range testjournal.HostileKinds() {
		paths = append(paths, "/kinds/pause?kind="+url.QueryEscape(k))
	}
	for _, p := range paths {
		code, body := get(t, h, p)
		if code != 200 {
			t.Errorf("GET %s = %d:\n%.2000s", p, code, body)
		}
		for _, bad := range []string{"\x1b", "\u202e", "\x9b", "\xff", "<script>", "<img", `onerror="`} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s shows %q raw", p, bad)
			}
		}
	}
	if _, body := get(t, h, "/kinds"); strings.Count(body, "Pause…") != len(testjournal.HostileKinds()) {
		t.Errorf("kinds page offers %d pause links, want one per kind (%d)", strings.Count(body, "Pause…"), len(testjournal.HostileKinds()))
	}
}
