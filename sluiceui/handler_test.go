package sluiceui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// quiet drops the handler's logs in tests.
var quiet = slog.New(slog.DiscardHandler)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	return rec.Code, rec.Body.String()
}

func post(t *testing.T, h http.Handler, path string, form url.Values, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// ids lists the job ids of a jobs page's rows, in order.
func ids(body string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`<tr data-id="(\d+)"`).FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

func allowAll(*http.Request, sluiceui.Action) error { return nil }

func TestPagesRender(t *testing.T) {
	r, _ := testjournal.Open(t)
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, Authorize: allowAll})
	for _, tc := range []struct {
		path string
		code int
		has  []string
	}{
		{"/", 200, []string{`<td data-state="dead">2</td>`, `<td data-state="succeeded">2</td>`, `<td data-state="pending">1</td>`, `<td data-state="waiting">0</td>`, "fsync batches"}},
		{"/jobs", 200, []string{`<tr data-id="1" data-state="succeeded">`, `<tr data-id="5" data-state="dead">`}},
		{"/jobs/2", 200, []string{"smtp 550: mailbox unavailable", "permanent", `&#34;bad-1&#34;`, `id="retry"`}},
		{"/jobs/4", 200, []string{`id="cancel"`, "No attempt yet."}},
		{"/breakers", 200, []string{"<table class=\"breakers\""}},
		{"/assets/style.css", 200, []string{"font:"}},
		{"/jobs/99", 404, []string{"job not found"}},
		{"/jobs/x", 400, []string{"want a number"}},
		{"/jobs?state=lost", 400, []string{`state &#34;lost&#34;`}},
	} {
		code, body := get(t, h, tc.path)
		if code != tc.code {
			t.Errorf("GET %s = %d, want %d; body:\n%s", tc.path, code, tc.code, body)
		}
		for _, s := range tc.has {
			if !strings.Contains(body, s) {
				t.Errorf("GET %s lacks %q; body:\n%s", tc.path, s, body)
			}
		}
	}
}

func TestJobsFilterAndPaging(t *testing.T) {
	r, _ := testjournal.Open(t)
	h := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, tc := range []struct {
		query string
		want  []string
		next  string // the next page's link ("" none)
	}{
		{"", []string{"1", "2", "3", "4", "5"}, ""},
		{"state=dead", []string{"2", "5"}, ""},
		{"state=dead,pending", []string{"2", "4", "5"}, ""},
		{"target=b.example", []string{"3", "5"}, ""},
		{"state=dead&target=b.example", []string{"5"}, ""},
		{"kind=email", nil, ""},
		{"limit=2", []string{"1", "2"}, "jobs?after=2&amp;limit=2"},
		{"limit=2&after=2", []string{"3", "4"}, "jobs?after=4&amp;limit=2"},
		{"limit=2&after=4", []string{"5"}, ""},
	} {
		code, body := get(t, h, "/jobs?"+tc.query)
		if code != 200 {
			t.Fatalf("GET /jobs?%s = %d:\n%s", tc.query, code, body)
		}
		if diff := cmp.Diff(tc.want, ids(body)); diff != "" {
			t.Errorf("GET /jobs?%s ids (-want +got):\n%s", tc.query, diff)
		}
		m := regexp.MustCompile(`href="\./(jobs\?[^"]*)" id="next"`).FindStringSubmatch(body)
		got := ""
		if m != nil {
			got = m[1]
		}
		if got != tc.next {
			t.Errorf("GET /jobs?%s next link = %q, want %q", tc.query, got, tc.next)
		}
	}
}

// token reads the confirmation page's token.
func token(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`name="token" value="([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no token on the confirmation page:\n%s", body)
	}
	return m[1]
}

func TestActionsNeedAuthorizeTokenAndSameOrigin(t *testing.T) {
	r, _ := testjournal.Open(t)
	src := sluiceui.FromRunner(r.Runner)
	refusing := sluiceui.New(src, sluiceui.Options{Logger: quiet, PublicRead: true})
	if code, body := get(t, refusing, "/jobs/2/retry"); code != 403 || !strings.Contains(body, "Options.Authorize") {
		t.Errorf("confirm page without Authorize = %d, want 403 naming Options.Authorize:\n%s", code, body)
	}
	if rec := post(t, refusing, "/jobs/2/retry", url.Values{"token": {"x"}}, nil); rec.Code != 403 {
		t.Errorf("POST retry without Authorize = %d, want 403", rec.Code)
	}
	if _, body := get(t, refusing, "/jobs/2"); strings.Contains(body, `id="retry"`) {
		t.Errorf("job page shows a retry link that would be refused:\n%s", body)
	}

	denied := errors.New("only admins")
	h := sluiceui.New(src, sluiceui.Options{Logger: quiet, Authorize: func(req *http.Request, a sluiceui.Action) error {
		if a != sluiceui.ActionView && req.Header.Get("X-Admin") == "" {
			return denied
		}
		return nil
	}})
	admin := map[string]string{"X-Admin": "1"}
	confirm := func() string {
		t.Helper()
		req := httptest.NewRequest("GET", "/jobs/2/retry", nil)
		req.Header.Set("X-Admin", "1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("confirm page = %d:\n%s", rec.Code, rec.Body)
		}
		return token(t, rec.Body.String())
	}
	tok := confirm()

	for _, tc := range []struct {
		name string
		path string
		form url.Values
		hdr  map[string]string
		code int
	}{
		{"not authorized", "/jobs/2/retry", url.Values{"token": {tok}}, nil, 403},
		{"no token", "/jobs/2/retry", nil, admin, 400},
		{"token of another job", "/jobs/5/retry", url.Values{"token": {tok}}, admin, 400},
		{"token of another action", "/jobs/2/cancel", url.Values{"token": {tok}}, admin, 400},
		{"cross-site", "/jobs/2/retry", url.Values{"token": {tok}}, map[string]string{"X-Admin": "1", "Sec-Fetch-Site": "cross-site"}, 403},
		{"unknown action", "/jobs/2/delete", url.Values{"token": {tok}}, admin, 404},
	} {
		if rec := post(t, h, tc.path, tc.form, tc.hdr); rec.Code != tc.code {
			t.Errorf("%s: POST %s = %d, want %d:\n%s", tc.name, tc.path, rec.Code, tc.code, rec.Body)
		}
	}
	// A token presented with the wrong job or action is spent: it cannot be tried again.
	if rec := post(t, h, "/jobs/2/retry", url.Values{"token": {tok}}, admin); rec.Code != 400 {
		t.Errorf("a token spent on another job = %d, want 400", rec.Code)
	}
	tok = confirm()
	if j, _ := r.Get(context.Background(), 2); j.State != sluice.StateDead {
		t.Fatalf("job 2 is %v after refused requests, want dead", j.State)
	}

	rec := post(t, h, "/jobs/2/retry", url.Values{"token": {tok}}, map[string]string{"X-Admin": "1", "Sec-Fetch-Site": "same-origin"})
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "../2?done=retry" {
		t.Fatalf("POST retry = %d Location %q, want 303 ../2?done=retry:\n%s", rec.Code, rec.Header().Get("Location"), rec.Body)
	}
	if j, _ := r.Get(context.Background(), 2); j.State != sluice.StatePending {
		t.Errorf("job 2 is %v after retry, want pending", j.State)
	}
	// The same confirmation again: a token is single-use.
	if rec := post(t, h, "/jobs/2/retry", url.Values{"token": {tok}}, admin); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), "used or expired") {
		t.Errorf("second retry with the same token = %d, want 400 (used):\n%s", rec.Code, rec.Body)
	}
	// A fresh confirmation: the runner refuses, the job is no longer dead.
	if rec := post(t, h, "/jobs/2/retry", url.Values{"token": {confirm()}}, admin); rec.Code != http.StatusConflict {
		t.Errorf("retry of a pending job = %d, want 409:\n%s", rec.Code, rec.Body)
	}
}

func TestReadOnlySourceHidesAndRefusesActions(t *testing.T) {
	dir := testjournal.Closed(t)
	src, err := sluiceui.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sluiceui.New(src, sluiceui.Options{Logger: quiet, Authorize: allowAll})
	code, body := get(t, h, "/jobs/2")
	if code != 200 || strings.Contains(body, `id="retry"`) || !strings.Contains(body, "read-only") {
		t.Errorf("GET /jobs/2 of a directory = %d, want no retry link and a read-only badge:\n%s", code, body)
	}
	if code, _ := get(t, h, "/jobs/2/retry"); code != 403 {
		t.Errorf("confirm page of a directory = %d, want 403", code)
	}
	if rec := post(t, h, "/jobs/2/retry", nil, nil); rec.Code != 403 {
		t.Errorf("POST retry to a directory = %d, want 403", rec.Code)
	}
	_, body = get(t, h, "/jobs?state=dead")
	if diff := cmp.Diff([]string{"2", "5"}, ids(body)); diff != "" {
		t.Errorf("dead jobs of a directory (-want +got):\n%s", diff)
	}
	if _, body := get(t, h, "/breakers"); !strings.Contains(body, "not journaled") {
		t.Errorf("breakers of a directory do not say there are none:\n%s", body)
	}
}

func TestMountedUnderAPrefix(t *testing.T) {
	r, _ := testjournal.Open(t)
	mux := http.NewServeMux()
	mux.Handle("/ops/sluice/", http.StripPrefix("/ops/sluice", sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true})))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/ops/sluice/jobs/2")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`href="([^"]*style.css)"`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no stylesheet link:\n%s", body)
	}
	u, _ := url.Parse(srv.URL + "/ops/sluice/jobs/2")
	css := u.ResolveReference(&url.URL{Path: string(m[1])})
	if resp, err := http.Get(css.String()); err != nil || resp.StatusCode != 200 {
		t.Errorf("GET %s = %v, %v; want 200", css, resp, err)
	}
}

func TestBreakersPageShowsOpenTargetWithCooldown(t *testing.T) {
	h := func(_ context.Context, j sluice.Job[string]) error {
		return errors.New("503 from upstream")
	}
	cfg := sluice.Config{Capacity: 1, Circuit: sluice.Circuit{Threshold: 1, Window: time.Minute, Cooldown: time.Hour}}
	r, err := sluice.Open(t.TempDir(), cfg, sluice.JSON[string](), h)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	if _, err := r.Enqueue(ctx, time.Time{}, "down.example", "x", sluice.WithAttempts(1)); err != nil {
		t.Fatal(err)
	}
	if err := r.DrainDue(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ui := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true, Now: func() time.Time { return now }})
	code, body := get(t, ui, "/breakers")
	row := regexp.MustCompile(`(?s)<tr data-target="down.example">.*?</tr>`).FindString(body)
	if code != 200 || !strings.Contains(row, `class="breaker-open">open<`) || !strings.Contains(row, "(in 59m5") && !strings.Contains(row, "(in 1h0m0s)") {
		t.Errorf("GET /breakers = %d, want down.example open with an hour of cooldown; row %q:\n%s", code, row, body)
	}
	if _, body := get(t, ui, "/"); !strings.Contains(body, "1 target(s)</a> with a breaker") {
		t.Errorf("overview does not count the open breaker:\n%s", body)
	}
}

// TestOverviewThroughputBetweenViews: throughput is the journal's records and batches per
// second between two views a second or more apart; before that it says when it will know.
func TestOverviewThroughputBetweenViews(t *testing.T) {
	r, _ := testjournal.Open(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ui := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, PublicRead: true, Now: func() time.Time { return now }})
	before, err := r.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, body := get(t, ui, "/"); !strings.Contains(body, "measured from the next refresh") {
		t.Errorf("first overview claims a throughput:\n%s", body)
	}
	for i := 0; i < 4; i++ {
		if _, err := r.Enqueue(context.Background(), time.Now().Add(time.Hour), "c.example", "x"); err != nil {
			t.Fatal(err)
		}
	}
	after, err := r.Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	_, body := get(t, ui, "/")
	want := fmt.Sprintf("%.1f records/s, %.1f batches/s (over 2s)",
		float64(after.Records-before.Records)/2, float64(after.Commits-before.Commits)/2)
	if !strings.Contains(body, want) {
		t.Errorf("overview lacks %q:\n%s", want, body)
	}
	if !strings.Contains(body, fmt.Sprintf(`<td id="commits">%d</td>`, after.Commits)) {
		t.Errorf("overview lacks %d fsync batches:\n%s", after.Commits, body)
	}
}
