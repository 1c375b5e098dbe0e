package sluiceui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// chromiumPath is Debian's chromium, which .ci/run installs; SLUICE_CHROMIUM names another.
const chromiumPath = "/usr/bin/chromium"

// browser returns a chromedp context on a fresh headless Chromium. Without Chromium the test
// is skipped locally and fails in CI (CI set), where it must run.
func browser(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	path, err := chromium()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and Chromium is missing (%v): .ci/run installs Debian's chromium package", err)
		}
		t.Skipf("skipping the browser test: Chromium is missing (%v); install it with `apt-get install chromium` or name it in SLUICE_CHROMIUM (in CI, with CI set, this test fails instead)", err)
	}
	actx, cancel := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	t.Cleanup(cancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	return bctx
}

// chromium finds the browser: SLUICE_CHROMIUM if set, else Debian's path, else PATH.
func chromium() (string, error) {
	if p := os.Getenv("SLUICE_CHROMIUM"); p != "" {
		_, err := os.Stat(p)
		return p, err
	}
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath, nil
	}
	return exec.LookPath("chromium")
}

// TestBrowserFilterRetryAndCancel drives the UI in a real headless Chromium: the overview renders
// the counts, the jobs filter narrows the list to dead jobs, retry with its confirmation
// makes a dead job pending again, in the runner too, and cancel a pending one cancelled.
func TestBrowserFilterRetryAndCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx := browser(t, ctx)

	r, _ := testjournal.Open(t)
	mux := http.NewServeMux()
	ui := sluiceui.New(sluiceui.FromRunner(r.Runner), sluiceui.Options{Logger: quiet, Authorize: allowAll})
	mux.Handle("/ops/", http.StripPrefix("/ops", ui))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	rows := `Array.from(document.querySelectorAll('#jobs tbody tr[data-id]')).map(r => r.dataset.id)`
	must := func(step string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		must("text of "+sel, err)
		return s
	}
	ids := func() []string {
		t.Helper()
		v, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](rows))
		must("job rows", err)
		return v
	}

	must("overview", chromedp.Do(bctx, chromedp.Navigate(srv.URL+"/ops/")))
	title, err := chromedp.Run(bctx, chromedp.Title())
	must("title", err)
	if dead := text(`td[data-state="dead"]`); dead != "2" || title != "Overview · sluice" {
		t.Errorf("overview: dead count %q, title %q; want 2 and %q", dead, title, "Overview · sluice")
	}

	must("jobs", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`header a[href$="jobs"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#filter`)),
	))
	if diff := cmp.Diff([]string{"1", "2", "3", "4", "5"}, ids()); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
	must("filter", chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#state`), "dead"),
		chromedp.Click(chromedp.CSS(`#apply`)),
		// The page before the filter has dead rows too: wait for the filtered page itself.
		chromedp.WaitVisible(chromedp.CSS(`#jobs[data-filter="dead"]`)),
	))
	if diff := cmp.Diff([]string{"2", "5"}, ids()); diff != "" {
		t.Errorf("jobs filtered to dead (-want +got):\n%s", diff)
	}

	must("retry", chromedp.Do(bctx,
		chromedp.Click(chromedp.CSS(`#jobs a[href$="jobs/2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#retry`)),
		chromedp.Click(chromedp.CSS(`#retry`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#yes`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	))
	location, err := chromedp.Run(bctx, chromedp.Location())
	must("location", err)
	state, flash := text(`#state`), text(`#flash`)
	if state != "pending" || flash != "Done: retry." || location != srv.URL+"/ops/jobs/2?done=retry" {
		t.Errorf("after retry: state %q, flash %q, location %q; want pending, %q, %s", state, flash, location,
			"Done: retry.", srv.URL+"/ops/jobs/2?done=retry")
	}
	if j, err := r.Get(context.Background(), 2); err != nil || j.State != sluice.StatePending {
		t.Errorf("runner's job 2 after retry in the browser = %v, %v; want pending", j.State, err)
	}

	// Cancel the pending job 4: its confirmation page, then the job page says cancelled.
	must("cancel", chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/ops/jobs/4"),
		chromedp.Click(chromedp.CSS(`#cancel`)),
		chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
		chromedp.Click(chromedp.CSS(`#yes`)),
		chromedp.WaitVisible(chromedp.CSS(`#flash`)),
	))
	if state := text(`#state`); state != "cancelled" {
		t.Errorf("job 4's page after cancel says %q, want cancelled", state)
	}
	if j, err := r.Get(context.Background(), 4); err != nil || j.State != sluice.StateCancelled {
		t.Errorf("runner's job 4 after cancel in the browser = %v, %v; want cancelled", j.State, err)
	}
}

// TestBrowserPauseAndResumeHostileKinds: in headless Chromium, the kinds page's Pause link and
// its confirmation pause a kind whose name holds markup, terminal escapes, a bidi override or
// invalid UTF-8 (the name travels percent-encoded in the URLs, byte for byte), durably as the
// journal says; the row's Resume link then undoes one.
func TestBrowserPauseAndResumeHostileKinds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx := browser(t, ctx)

	r, dir := testjournal.OpenHostile(t)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", sluiceui.New(sluiceui.FromRunner(r), sluiceui.Options{Logger: quiet, Authorize: allowAll})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	kinds := testjournal.HostileKinds()
	picked := []string{kinds[0], kinds[3], kinds[6], kinds[8]} // markup, escapes, bidi, invalid UTF-8
	// The kind's row offers Pause, or Resume once the runner lists it paused.
	act := func(k, button string) {
		t.Helper()
		if err := chromedp.Do(bctx,
			chromedp.Navigate(srv.URL+"/ops/kinds"),
			chromedp.Click(chromedp.CSS(`tr[data-kind="`+url.QueryEscape(k)+`"] a.button[href*="/`+button+`?"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#confirm`)),
			chromedp.Click(chromedp.CSS(`#yes`)),
			chromedp.WaitVisible(chromedp.CSS(`#flash`)),
		); err != nil {
			t.Fatalf("%s %q: %v", button, k, err)
		}
	}
	for _, k := range picked {
		act(k, "pause")
	}
	src, err := sluiceui.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := src.Paused(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(picked)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paused in the journal after the browser paused them (-want +got):\n%s", diff)
	}
	act(picked[3], "resume")
	src, err = sluiceui.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = src.Paused(context.Background())
	want = slices.DeleteFunc(want, func(k string) bool { return k == picked[3] })
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paused after resuming %q (-want +got):\n%s", picked[3], diff)
	}
}
