package sluiceui_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/testjournal"
	"github.com/sluicehq/sluice/sluiceui"
)

// failing is a Source whose every read fails, as a poisoned or closed runner's would.
type failing struct{ err error }

func (f failing) Stats(context.Context) (sluice.Stats, error) { return sluice.Stats{}, f.err }
func (f failing) List(context.Context, sluiceui.Filter) (sluiceui.Page, error) {
	return sluiceui.Page{}, f.err
}
func (f failing) Get(context.Context, uint64) (sluiceui.Job, error)    { return sluiceui.Job{}, f.err }
func (f failing) Breakers(context.Context) ([]sluiceui.Breaker, error) { return nil, f.err }
func (f failing) Schedules(context.Context) ([]sluice.ScheduleInfo, error) {
	return nil, f.err
}
func (f failing) Retry(context.Context, uint64) error      { return f.err }
func (f failing) Cancel(context.Context, uint64) error     { return f.err }
func (f failing) Paused(context.Context) ([]string, error) { return nil, f.err }
func (f failing) Pause(context.Context, string) error      { return f.err }
func (f failing) Resume(context.Context, string) error     { return f.err }
func (f failing) ReadOnly() bool                           { return false }

// TestSourceErrorsArePagesNotPanics: a source that fails gives each page a 500 naming the
// error (escaped), and nothing else.
func TestSourceErrorsArePagesNotPanics(t *testing.T) {
	h := sluiceui.New(failing{errors.New("sluice: closed <now>")}, sluiceui.Options{Logger: quiet, PublicRead: true})
	for _, path := range []string{"/", "/jobs", "/jobs/1", "/breakers", "/schedules", "/kinds"} {
		code, body := get(t, h, path)
		if code != 500 || !strings.Contains(body, "sluice: closed &lt;now&gt;") {
			t.Errorf("GET %s = %d, want 500 with the escaped error:\n%s", path, code, body)
		}
	}
	if code, _ := get(t, h, "/nowhere"); code != 404 {
		t.Errorf("GET /nowhere = %d, want 404", code)
	}
}

// TestDirSourcePagesAndRereads: FromDir pages by id like the runner and sees a change made
// to the journal after it was created (here, a job the runner cancelled).
func TestDirSourcePagesAndRereads(t *testing.T) {
	dir := testjournal.Closed(t)
	src, err := sluiceui.FromDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var got []uint64
	f := sluiceui.Filter{Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 5 {
			t.Fatal("more than 5 pages of 2 for 5 jobs")
		}
		p, err := src.List(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			got = append(got, j.ID)
		}
		if !p.More {
			break
		}
		f.After = p.Next
	}
	if len(got) != 5 || got[0] != 1 || got[4] != 5 {
		t.Errorf("paged ids = %v, want 1 to 5", got)
	}
	if _, err := src.Get(ctx, 9); !errors.Is(err, sluice.ErrNotFound) {
		t.Errorf("Get(9) = %v, want ErrNotFound", err)
	}
	if err := src.Retry(ctx, 2); !errors.Is(err, sluiceui.ErrReadOnly) {
		t.Errorf("Retry on a directory = %v, want ErrReadOnly", err)
	}

	r2 := testjournal.Reopen(t, dir)
	if err := r2.Cancel(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if err := r2.Close(); err != nil {
		t.Fatal(err)
	}
	if j, err := src.Get(ctx, 4); err != nil || j.State != sluice.StateCancelled {
		t.Errorf("job 4 after the runner cancelled it = %v, %v; want cancelled", j.State, err)
	}
}
