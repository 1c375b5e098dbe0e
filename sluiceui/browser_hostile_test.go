package sluiceui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// TestBrowserHostileInput loads every page of a live runner whose kinds, targets, unique
// keys, payloads, errors and schedule names are hostile strings (markup, handlers, javascript:
// URLs, terminal escapes, bidi overrides, invalid UTF-8) in headless Chromium: no script runs,
// no element is injected, escapes are visible. Pages of 64 jobs with 1 MiB strings load in
// seconds (one such job took Chromium 31 s to 1 m 52 s). The charts and a job's attempt
// timeline render as SVG.
func TestBrowserHostileInput(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	bctx := browser(t, ctx)

	r, _ := testjournal.OpenHostile(t)
	mux := http.NewServeMux()
	mux.Handle("/ops/", http.StripPrefix("/ops", sluiceui.New(sluiceui.FromRunner(r), sluiceui.Options{Logger: quiet, Authorize: allowAll})))
	mux.Handle("/big/", http.StripPrefix("/big", sluiceui.New(newBigSource(64, 1<<20), sluiceui.Options{Logger: quiet, PublicRead: true})))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	paths := []string{"/ops/", "/ops/jobs", "/ops/breakers", "/ops/schedules", "/ops/jobs/2/retry", "/ops/jobs/1/cancel"}
	for id := 1; id <= len(testjournal.Hostile); id++ {
		paths = append(paths, fmt.Sprintf("/ops/jobs/%d", id))
	}
	paths = append(paths, "/ops/kinds")
	for _, k := range testjournal.HostileKinds() {
		paths = append(paths, "/ops/jobs?kind="+url.QueryEscape(k), "/ops/kinds/pause?kind="+url.QueryEscape(k))
	}
	// pwned is what a page's hostile strings did: a script that set window.__pwned, or an
	// element the strings made (an img with src x, a script in the content).
	const pwned = `(window.__pwned || 0) + document.querySelectorAll('img[src="x"], main script, main iframe').length`
	eval := func(expr string) int {
		t.Helper()
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return n
	}
	load := func(p string, sel string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(srv.URL+p), chromedp.WaitReady(chromedp.CSS(sel))); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	for _, p := range paths {
		load(p, "main")
		n, escapes := eval(pwned), eval(`document.querySelectorAll('span.esc').length`)
		if n != 0 {
			t.Errorf("%s: a hostile string ran or injected markup (%d)", p, n)
		}
		if p == "/ops/jobs" && escapes == 0 {
			t.Errorf("%s: no visible escape shown", p)
		}
	}

	load("/ops/jobs/2", "#timeline svg")
	rects := eval(`document.querySelectorAll('#timeline svg g.bar rect').length`)
	load("/ops/", "#charts")
	charts := eval(`document.querySelectorAll('#charts svg').length`)
	if rects != 1 || charts < 2 {
		t.Errorf("job 2's timeline has %d attempt bars (want 1); the overview %d charts (want at least 2)", rects, charts)
	}

	for _, p := range []string{"/big/jobs", "/big/jobs/1", "/big/", "/big/kinds"} {
		start := time.Now()
		load(p, "main")
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s with 64 jobs of 1 MiB strings took %v to load, want under 5 s", p, took)
		}
	}
}
