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
