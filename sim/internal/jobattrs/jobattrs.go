// Package jobattrs draws the fleet world's unusual job messages: attributes another producer
// adds, attributes damaged on the way, and dues far beyond any run.
package jobattrs

import (
	"math/rand"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/core"
	"github.com/sluicehq/sluice/core/qjobs"
)

// FarDues are the dues of parked jobs: far beyond any run, the last one at the end of year
// 9999 (its wait saturates time.Duration).
var FarDues = []time.Duration{30 * 24 * time.Hour, 400 * 24 * time.Hour, -1}

// Damage is one way a job message's attributes can arrive broken (a producer of another
// version or program, an attribute dropped on the way); Names is what Decode's error must name.
type Damage struct {
	What, Names string
	damage      func(map[string]string)
}

// Apply returns a damaged copy of attrs.
func (d Damage) Apply(attrs map[string]string) map[string]string {
	out := make(map[string]string, len(attrs)+1)
	for k, v := range attrs { // a copy: the order does not matter
		out[k] = v
	}
	d.damage(out)
	return out
}

// Damages are the damages a job message's attributes can suffer.
var Damages = []Damage{
	{"no kind", qjobs.AttrKind, func(a map[string]string) { delete(a, qjobs.AttrKind) }},
	{"empty kind", "kind", func(a map[string]string) { a[qjobs.AttrKind] = "" }},
	{"kind with NUL", "kind", func(a map[string]string) { a[qjobs.AttrKind] = "jo\x00b" }},
	{"no target", "target", func(a map[string]string) { delete(a, qjobs.AttrTarget) }},
	{"garbled first due", qjobs.AttrFirstDue, func(a map[string]string) { a[qjobs.AttrFirstDue] = "yesterday" }},
	{"no first due", qjobs.AttrFirstDue, func(a map[string]string) { delete(a, qjobs.AttrFirstDue) }},
	{"garbled attempt", qjobs.AttrAttempt, func(a map[string]string) { a[qjobs.AttrAttempt] = "2nd" }},
	{"negative attempt", "negative", func(a map[string]string) { a[qjobs.AttrAttempt] = "-1" }},
	{"garbled options", qjobs.AttrOpts, func(a map[string]string) { a[qjobs.AttrOpts] = `{"m":` }},
	{"negative attempts max", "negative", func(a map[string]string) { a[qjobs.AttrOpts] = `{"m":-2}` }},
}

// What Foreign added to a message.
const (
	None       = iota
	BinaryKind // the kind as a Binary attribute: not a job
	Other      // another producer's attributes: still a job
)

// Foreign gives job n's message, one in eight, attributes of another producer (a trace id, a
// Number, a Binary), and, when it is well formed, one in forty-eight a Binary sluice-kind
// (not a job: as it is to the dead-letter queue, Binary kept).
func Foreign(r *rand.Rand, n int, wellFormed bool, out *core.Outgoing) int {
	switch {
	case wellFormed && r.Intn(48) == 0:
		attrs := make(map[string]string, len(out.Attributes))
		for k, v := range out.Attributes { // a copy: the order does not matter
			attrs[k] = v
		}
		delete(attrs, qjobs.AttrKind)
		out.Attributes = attrs
		out.Typed = map[string]core.Attribute{qjobs.AttrKind: {Type: "Binary", Binary: []byte("job")}}
		return BinaryKind
	case r.Intn(8) == 0:
		out.Typed = map[string]core.Attribute{
			"trace-id":   {Type: "String", String: "t-" + strconv.Itoa(n)},
			"hops.count": {Type: "Number.int", String: strconv.Itoa(r.Intn(1000))},
			"sig":        {Type: "Binary", Binary: []byte{0, byte(n), 0xff}},
		}
		return Other
	}
	return None
}
