package svgtime

import (
	"bytes"
	"flag"
	"os"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/ui.svg")

// A chart that uses none of the simulator's options (the web UI's kind) is drawn exactly as
// testdata/ui.svg: extending the package must not move the UI's markup.
func TestUIChartUnchanged(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Chart{From: t0, To: t0.Add(time.Minute), Width: 700, Label: 80, Lanes: []Lane{
		{Name: "attempts", Bars: []Bar{
			{From: t0, To: t0.Add(20 * time.Second), Label: "#1", Title: "attempt 1: failed", Class: "failed"},
			{From: t0.Add(30 * time.Second), Label: "#2", Title: "attempt 2: running", Class: "running"},
		}},
		{Name: "t1", Bars: []Bar{{From: t0, To: t0.Add(time.Minute), Class: "half-open"}},
			Marks: []Mark{{At: t0.Add(10 * time.Second), Title: "crash", Class: "crash"}}},
	}}
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/ui.svg", b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/ui.svg")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("UI chart changed:\n%s\nwant:\n%s", b.Bytes(), want)
	}
}
