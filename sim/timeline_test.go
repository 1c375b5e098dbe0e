package sim

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// tlDoc is what a timeline test reads back: lanes by name, marks by class, the violation.
type tlDoc struct {
	lanes     []string
	classes   map[string]int
	violation string
	remote    []string // any src or href attribute: a timeline loads nothing
}

func parseTimeline(t *testing.T, page []byte) tlDoc {
	t.Helper()
	d := tlDoc{classes: map[string]int{}}
	dec := xml.NewDecoder(bytes.NewReader(page))
	dec.Strict = true
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("timeline is not well-formed: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		if se.Name.Local == "script" {
			d.remote = append(d.remote, "<script>")
		}
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "data-lane":
				d.lanes = append(d.lanes, a.Value)
			case "class":
				for _, c := range strings.Fields(a.Value) {
					d.classes[c]++
				}
			case "data-invariant":
				d.violation = a.Value
			case "src", "href":
				d.remote = append(d.remote, a.Value)
			}
		}
	}
	return d
}

// A failing run's timeline is well-formed, self-contained, has a lane per node, per target and
// per worker, marks crashes and the violation with its leading events outlined, and is the
// same bytes every time.
func TestTimelineLanesAndMarks(t *testing.T) {
	o := firstFailing(t, "swarm", mutAckEarly, 40)
	var a, b bytes.Buffer
	res, err := WriteTimeline(&a, o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteTimeline(&b, o); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("the same seed gave two different timelines")
	}
	if res.Violation == nil {
		t.Fatal("the planted defect broke nothing on this seed")
	}
	d := parseTimeline(t, a.Bytes())
	if len(d.remote) > 0 {
		t.Errorf("timeline loads %v", d.remote)
	}
	want := map[string]bool{}
	for i := 1; i <= res.Config.Nodes; i++ {
		want["node/"+string(rune('0'+i))] = true
	}
	for i := 1; i <= res.Config.Workers; i++ {
		want["worker/"+string(rune('0'+i))] = true
	}
	got := map[string]bool{}
	breakers := 0
	for _, l := range d.lanes {
		got[l] = true
		if strings.Contains(l, " breaker ") {
			breakers++
		}
	}
	for l := range want {
		if !got[l] {
			t.Errorf("no lane %s among %v", l, d.lanes)
		}
	}
	if breakers == 0 {
		t.Errorf("no breaker lane among %v", d.lanes)
	}
	if d.violation != res.Violation.Invariant {
		t.Errorf("violation mark %q, want %q", d.violation, res.Violation.Invariant)
	}
	for _, c := range []string{"att", "crash", "sync", "lead", "lease"} {
		if d.classes[c] == 0 {
			t.Errorf("no element of class %q (classes %v)", c, d.classes)
		}
	}
}
