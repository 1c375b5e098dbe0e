package svgtime

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

func TestWriteEscapesPacksAndRepeats(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := Chart{From: t0, To: t0.Add(10 * time.Second), Lanes: []Lane{{
		Name: `<script>alert(1)</script>`,
		Bars: []Bar{
			{From: t0, To: t0.Add(4 * time.Second), Label: "#1", Title: `"quoted" & <b>`, Class: "failed"},
			{From: t0.Add(2 * time.Second), To: t0.Add(3 * time.Second), Label: "#2", Class: "ok"}, // overlaps: row 1
			{From: t0.Add(5 * time.Second), Class: "running"},                                      // open-ended: to the end
		},
		Marks: []Mark{{At: t0.Add(9 * time.Second), Title: "crash"}},
	}}}
	var a, b bytes.Buffer
	if err := Write(&a, c); err != nil {
		t.Fatal(err)
	}
	_ = Write(&b, c)
	if a.String() != b.String() {
		t.Error("the same chart gave different bytes")
	}
	out := a.String()
	if strings.Contains(out, "<script>") || strings.Contains(out, "<b>") {
		t.Errorf("unescaped text:\n%s", out)
	}
	if !strings.Contains(out, `y="22"`) {
		t.Errorf("the overlapping bar is not on a second row:\n%s", out)
	}
	dec := xml.NewDecoder(strings.NewReader(out))
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, out)
		}
	}
}

func TestPack(t *testing.T) {
	t0 := time.Unix(0, 0)
	bars := []Bar{{From: t0, To: t0.Add(2)}, {From: t0.Add(2), To: t0.Add(3)}, {From: t0.Add(1), To: t0.Add(5)}}
	got := pack(bars)
	if got[0] != 0 || got[1] != 0 || got[2] != 1 {
		t.Errorf("pack = %v, want [0 0 1]", got)
	}
}

// The simulator's options: a lane with data attributes is a group with a band, ticks sit inside
// their bar, a dot is a circle, a marker spans every lane, the axis shows the caller's labels.
func TestSimulatorOptions(t *testing.T) {
	t0 := time.Unix(0, 0).UTC()
	c := Chart{From: t0, To: t0.Add(10 * time.Second), Width: 100, Label: 50, Lanes: []Lane{
		{Name: "worker/1", Data: []Attr{{Name: "lane", Value: `w"1`}}, Bars: []Bar{{From: t0, To: t0.Add(5 * time.Second),
			Class: "lease", Ticks: []time.Time{t0.Add(2 * time.Second)}, TickClass: "renew"}}},
		{Name: "breaker", Marks: []Mark{{At: t0.Add(time.Second), Class: "dot ok", Dot: true}}},
	}, Markers: []Marker{{At: t0.Add(5 * time.Second), Class: "violation", Data: []Attr{{Name: "invariant", Value: "lost-ack"}}}},
		Axis: []Tick{{At: t0, Text: "0.000s"}, {At: t0.Add(10 * time.Second), Text: "<10s>"}}}
	var b bytes.Buffer
	if err := Write(&b, c); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`<g class="lane" data-lane="w&#34;1">`,
		`<rect class="band" x="0" y="0" width="150" height="18"`,
		`<line class="tick renew" x1="70.0" y1="0" x2="70.0" y2="18"`,
		`<circle cx="60.0" cy="31" r="3"`,
		`<line class="marker violation" data-invariant="lost-ack" x1="100.0" y1="0" x2="100.0" y2="44"`,
		`text-anchor="end">&lt;10s&gt;</text>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "1970-01-01") {
		t.Errorf("the default stamps are drawn beside the caller's axis:\n%s", out)
	}
}

// A data attribute name that is not one is refused, and nothing is written.
func TestBadDataAttribute(t *testing.T) {
	for _, name := range []string{"", `x="1" onload`, "Lane"} {
		var b bytes.Buffer
		err := Write(&b, Chart{Lanes: []Lane{{Name: "l", Data: []Attr{{Name: name}}}}})
		if err == nil || !strings.Contains(err.Error(), "svgtime: data attribute name") || b.Len() > 0 {
			t.Errorf("name %q: err %v, wrote %d bytes", name, err, b.Len())
		}
	}
}
