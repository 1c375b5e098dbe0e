// Package trace is the simulator's trace: one line per event, "<time> <who> <what>", with
// times as offsets from the run's epoch in integer arithmetic, a running SHA-256 of every line
// (a run's digest) and the last lines for violation reports.
package trace

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"strconv"
	"time"
)

// LastMax is how many trace lines a violation report shows.
const LastMax = 30

// Trace records one line per event: a running SHA-256 of every line, the last LastMax
// lines for violation reports, and, when out is set, every line as it happens.
type Trace struct {
	out   io.Writer
	sum   hash.Hash
	ring  [LastMax][]byte // reused buffers: a line becomes a string only in Last
	n     int             // lines so far
	buf   []byte
	err   error
	Lines int

	// The time prefix of the last line: the events of one instant share it (appendOffset's
	// digits cost as much as the rest of a line).
	prefixAt  time.Duration
	prefixLen int // bytes of buf's first line that are "<time> "; 0: none yet
}

// New returns a trace that also writes every line to out when out is not nil.
func New(out io.Writer) *Trace {
	return &Trace{out: out, sum: sha256.New(), buf: make([]byte, 0, 256)}
}

// Add records one line "<time> <who> <what>"; what is already rendered by the caller.
func (t *Trace) Add(at time.Duration, who, what string) {
	var b []byte
	if t.prefixLen > 0 && at == t.prefixAt {
		b = t.buf[:t.prefixLen]
	} else {
		b = appendOffset(t.buf[:0], at)
		b = append(b, ' ')
		t.prefixAt, t.prefixLen = at, len(b)
	}
	b = append(b, who...)
	b = append(b, ' ')
	b = append(b, what...)
	b = append(b, '\n')
	t.buf = b
	t.sum.Write(b)
	i := t.n % LastMax
	t.ring[i] = append(t.ring[i][:0], b[:len(b)-1]...)
	t.n++
	t.Lines++
	if t.out != nil && t.err == nil {
		_, t.err = t.out.Write(b)
	}
}

// Last returns up to LastMax most recent lines, oldest first.
func (t *Trace) Last() []string {
	k := t.n
	if k > LastMax {
		k = LastMax
	}
	out := make([]string, 0, k)
	for i := t.n - k; i < t.n; i++ {
		out = append(out, string(t.ring[i%LastMax]))
	}
	return out
}

// Digest is the hex SHA-256 of every line so far.
func (t *Trace) Digest() string { return hex.EncodeToString(t.sum.Sum(nil)) }

// Err is the first error writing to out.
func (t *Trace) Err() error { return t.err }

// appendOffset renders d as seconds with millisecond-or-finer digits: "12.345s", "0.000001s".
// Integer arithmetic only, so every machine prints the same bytes.
func appendOffset(b []byte, d time.Duration) []byte {
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	b = strconv.AppendInt(b, int64(d/time.Second), 10)
	frac := int64(d % time.Second)
	b = append(b, '.')
	digits := 9
	for digits > 3 && frac%10 == 0 {
		frac /= 10
		digits--
	}
	var digitsBuf [20]byte
	s := strconv.AppendInt(digitsBuf[:0], frac, 10)
	for i := len(s); i < digits; i++ {
		b = append(b, '0')
	}
	b = append(b, s...)
	return append(b, 's')
}

// Perturb reallocates the line buffer with another capacity (the determinism check's second
// run): nothing a trace prints may depend on it.
func (t *Trace) Perturb() { t.buf, t.prefixLen = make([]byte, 0, 4093), 0 }

// Offset renders d as appendOffset does.
func Offset(d time.Duration) string { return string(appendOffset(nil, d)) }
