package runner

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"pgregory.net/rapid"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func genTime(t *rapid.T, label string) time.Time {
	return epoch.Add(time.Duration(rapid.Int64Range(-1e15, 1e15).Draw(t, label)))
}

func genRecord(t *rapid.T) Record {
	r := Record{ID: rapid.Uint64Min(1).Draw(t, "id")}
	r.Tag = rapid.SampledFrom([]uint8{TagEnqueued, TagStarted, TagFinished, TagDeferred, TagCancelled, TagRetried, TagExpired, TagSnoozed}).Draw(t, "tag")
	switch r.Tag {
	case TagEnqueued:
		r.Due = genTime(t, "due")
		r.Target = rapid.String().Draw(t, "target")
		if p := rapid.SliceOf(rapid.Byte()).Draw(t, "payload"); len(p) > 0 {
			r.Payload = p
		}
		r.Opts = genOpts(t)
	case TagStarted:
		r.Attempt = rapid.IntRange(1, 1<<32-1).Draw(t, "attempt")
		r.At = genTime(t, "at")
	case TagSnoozed:
		r.Attempt = rapid.IntRange(1, 1<<32-1).Draw(t, "attempt")
		r.At, r.Due = genTime(t, "at"), genTime(t, "due")
	case TagFinished:
		r.Attempt = rapid.IntRange(1, 1<<32-1).Draw(t, "attempt")
		r.At = genTime(t, "at")
		switch rapid.IntRange(0, 5).Draw(t, "kind") {
		case 0:
			r.Kind, r.Next = OutcomeSucceeded, Succeeded
		case 1:
			r.Kind, r.Retryable, r.Next, r.Due = OutcomeFailed, true, Waiting, genTime(t, "due")
		case 2:
			r.Kind, r.Retryable, r.Next, r.Reason = OutcomeFailed, true, Dead, rapid.SampledFrom([]Reason{Spent, Late}).Draw(t, "reason")
		case 3:
			r.Kind, r.Next, r.Reason = OutcomeFailed, Dead, Permanent
		default:
			r.Kind, r.Next, r.Reason = OutcomePanicked, Dead, Panic
		}
		if r.Kind != OutcomeSucceeded {
			r.Err = rapid.String().Draw(t, "err")
		}
	case TagDeferred, TagRetried:
		r.Due = genTime(t, "due")
	case TagExpired:
		r.Reason = rapid.SampledFrom([]Reason{Spent, Late}).Draw(t, "reason")
	}
	return r
}

func genOpts(t *rapid.T) Opts {
	o := Opts{
		Priority:    rapid.IntRange(PriorityMin, PriorityMax).Draw(t, "priority"),
		AttemptsMax: rapid.IntRange(0, 1<<31-1).Draw(t, "attemptsMax"),
		Deadline:    time.Duration(rapid.Int64Range(0, 1<<62).Draw(t, "deadline")),
		Kind:        rapid.String().Draw(t, "kind"),
		Unique:      rapid.String().Draw(t, "unique"),
		UniqueFor:   time.Duration(rapid.Int64Range(0, 1<<62).Draw(t, "uniqueFor")),
	}
	if o.Unique == "" {
		o.UniqueFor = 0
	}
	return o
}

func TestRecordRoundTripDecodesWhatEncodeWrote(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRecord(t)
		data := EncodeRecord(r)
		got, err := DecodeRecord(r.Tag, data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if diff := cmp.Diff(r, got); diff != "" {
			t.Fatalf("(-want +got)\n%s", diff)
		}
		// Any strict prefix or extension is refused.
		if n := rapid.IntRange(0, len(data)-1).Draw(t, "cut"); true {
			if _, err := DecodeRecord(r.Tag, data[:n]); !errors.Is(err, ErrDecode) {
				t.Fatalf("prefix of %d bytes decoded: %v", n, err)
			}
		}
		if _, err := DecodeRecord(r.Tag, append(bytes.Clone(data), 0)); !errors.Is(err, ErrDecode) {
			t.Fatalf("trailing byte decoded: %v", err)
		}
	})
}

func genSnapshot(t *rapid.T) Snapshot {
	s := Snapshot{TermSeq: rapid.Uint64Range(0, 1000).Draw(t, "termseq")}
	n := rapid.IntRange(0, 8).Draw(t, "n")
	id := uint64(0)
	for i := 0; i < n; i++ {
		id += rapid.Uint64Range(1, 5).Draw(t, "gap")
		j := Job{ID: id, Target: rapid.String().Draw(t, "target"), FirstDue: genTime(t, "first"), Due: genTime(t, "due"),
			LastErr: rapid.String().Draw(t, "err")}
		if p := rapid.SliceOf(rapid.Byte()).Draw(t, "payload"); len(p) > 0 {
			j.Payload = p
		}
		j.Opts = genOpts(t)
		for k := range rapid.IntRange(0, HistoryMax).Draw(t, "history") {
			j.History = append(j.History, AttemptRecord{Attempt: k + 1, Start: genTime(t, "start"), End: genTime(t, "end"),
				Outcome: rapid.SampledFrom([]AttemptOutcome{AttemptRunning, AttemptSucceeded, AttemptFailed, AttemptPanicked, AttemptReleased}).Draw(t, "outcome"),
				Err:     rapid.String().Draw(t, "herr")})
			if h := &j.History[k]; h.Outcome == AttemptRunning {
				h.End = time.Time{}
			}
		}
		j.State = rapid.SampledFrom([]JobState{Waiting, Running, Succeeded, Dead, Cancelled}).Draw(t, "state")
		j.Attempts = rapid.IntRange(0, 10).Draw(t, "attempts")
		if j.State == Running && j.Attempts == 0 {
			j.Attempts = 1
		}
		if j.State == Dead {
			j.Reason = rapid.SampledFrom([]Reason{Late, Spent, Permanent, Panic}).Draw(t, "reason")
		}
		if j.State == Waiting {
			j.Deferred = rapid.Bool().Draw(t, "deferred")
		}
		if j.State.Terminal() {
			if s.TermSeq == 0 {
				s.TermSeq = 1
			}
			j.TermSeq = rapid.Uint64Range(1, s.TermSeq).Draw(t, "seq")
		}
		s.Jobs = append(s.Jobs, j)
	}
	s.NextID = id + 1 + rapid.Uint64Range(0, 3).Draw(t, "next")
	keys := rapid.SliceOfDistinct(rapid.SampledFrom([]string{"a", "b", "c", "d"}), func(k string) string { return k }).Draw(t, "windows")
	sort.Strings(keys)
	for _, k := range keys {
		if s.NextID < 2 {
			break
		}
		s.Windows = append(s.Windows, UniqueWindow{Kind: "email", Unique: k, ID: rapid.Uint64Range(1, s.NextID-1).Draw(t, "window id"),
			Until: genTime(t, "until")})
	}
	return s
}

func TestSnapshotRoundTripDecodesWhatEncodeWroteInOneBuffer(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := genSnapshot(t)
		data := EncodeSnapshot(s)
		if len(data) != cap(data) {
			t.Fatalf("encoded %d bytes into a buffer of %d: the size was not computed exactly", len(data), cap(data))
		}
		got, err := DecodeSnapshot(data)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if diff := cmp.Diff(s, got); diff != "" {
			t.Fatalf("(-want +got)\n%s", diff)
		}
		n := rapid.IntRange(0, len(data)-1).Draw(t, "cut")
		if _, err := DecodeSnapshot(data[:n]); !errors.Is(err, ErrDecode) {
			t.Fatalf("prefix of %d bytes decoded: %v", n, err)
		}
	})
}

func TestDecodeRejects(t *testing.T) {
	started := EncodeRecord(Record{Tag: TagStarted, ID: 7, Attempt: 2})
	expired := EncodeRecord(Record{Tag: TagExpired, ID: 7, Reason: Late})
	finished := EncodeRecord(Record{Tag: TagFinished, ID: 7, Attempt: 1, Kind: OutcomeSucceeded, Next: Succeeded})
	set := func(b []byte, i int, v byte) []byte { b = bytes.Clone(b); b[i] = v; return b }
	for _, tc := range []struct {
		name string
		tag  uint8
		data []byte
	}{
		{"empty", TagStarted, nil},
		{"newer version", TagStarted, set(started, 0, 4)},
		{"previous version", TagStarted, set(started, 0, 2)},
		{"older version", TagStarted, set(started, 0, 1)},
		{"unknown tag", 99, started},
		{"snapshot tag as record", TagSnapshot, started},
		{"wrong tag for length", TagCancelled, started},
		{"trailing bytes", TagStarted, append(bytes.Clone(started), 1)},
		{"attempt 0", TagStarted, set(started, 9, 0)},
		{"expired with reason permanent", TagExpired, set(expired, 9, byte(Permanent))},
		{"finished success going dead", TagFinished, set(finished, 19, byte(Dead))},
		{"bool byte 2", TagFinished, set(finished, 14, 2)},
	} {
		_, err := DecodeRecord(tc.tag, tc.data)
		if strings.HasSuffix(tc.name, "version") {
			if !errors.Is(err, ErrFormat) {
				t.Errorf("%s: err = %v, want ErrFormat", tc.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", tc.name, err)
		}
	}
	zeroID := set(started, 1, 0)
	if _, err := DecodeRecord(TagStarted, zeroID); !errors.Is(err, ErrDecode) {
		t.Errorf("id 0: err = %v", err)
	}
	const jobAt = 1 + 8 + 8 + 4 // version, next id, terminal sequence, count
	snap := EncodeSnapshot(Snapshot{NextID: 3, TermSeq: 1, Jobs: []Job{{ID: 1, State: Succeeded, TermSeq: 1}, {ID: 2, State: Waiting}}})
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"huge count", set(snap, 20, 0xff)},
		{"next id below a job", set(snap, 1, 2)},
		{"state out of range", set(snap, jobAt+8, 9)},
		{"terminal without sequence", set(snap, jobAt+8+1+1+1+4+8+8, 0)},
		{"deferred bool byte 2", set(snap, jobAt+8+1+1, 2)},
	} {
		if _, err := DecodeSnapshot(tc.data); !errors.Is(err, ErrDecode) {
			t.Errorf("%s: err = %v, want ErrDecode", tc.name, err)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(TagStarted, EncodeRecord(Record{Tag: TagStarted, ID: 1, Attempt: 1}))
	f.Add(TagEnqueued, EncodeRecord(Record{Tag: TagEnqueued, ID: 1, Due: epoch, Target: "a", Payload: []byte("x")}))
	f.Add(TagFinished, EncodeRecord(Record{Tag: TagFinished, ID: 3, Attempt: 2, Kind: OutcomeFailed, Retryable: true, Err: "e", Next: Waiting, Due: epoch}))
	f.Add(TagSnapshot, EncodeSnapshot(Snapshot{NextID: 3, TermSeq: 1, Jobs: []Job{{ID: 1, State: Dead, Reason: Panic, TermSeq: 1}, {ID: 2, State: Running, Attempts: 1}}}))
	f.Fuzz(func(t *testing.T, tag uint8, data []byte) {
		if tag == TagSnapshot {
			s, err := DecodeSnapshot(data)
			if err == nil && !bytes.Equal(EncodeSnapshot(s), data) {
				t.Fatalf("snapshot decoded but re-encodes differently")
			}
			return
		}
		r, err := DecodeRecord(tag, data)
		if err == nil && !bytes.Equal(EncodeRecord(r), data) {
			t.Fatalf("record decoded but re-encodes differently")
		}
	})
}

// A window's shortest encoding is 24 bytes plus its key (kind and key lengths, id, until): a
// snapshot holding several windows of one-byte keys in the default kind, and nothing after
// them, must decode. (Its count check once assumed 28 bytes a window, refusing this valid
// state at open; the simulator's forged-window probe found it.)
func TestSnapshotWithShortWindowsDecodes(t *testing.T) {
	until := epoch.Add(time.Hour)
	s := Snapshot{NextID: 4, Windows: []UniqueWindow{{Unique: "a", ID: 1, Until: until}, {Unique: "b", ID: 2, Until: until}, {Unique: "c", ID: 3, Until: until}}}
	got, err := DecodeSnapshot(EncodeSnapshot(s))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// enqueuedByReads decodes an Enqueued record's fields after its id with the general reads,
// as decodeRecord did before its fast path.
func enqueuedByReads(rd reader, r *Record) error {
	r.Due = rd.time()
	r.Target = rd.name()
	r.Payload = rd.payload()
	r.Opts = rd.opts()
	return rd.done()
}

// The Enqueued fast path (reader.enqueued) decodes exactly what the general reads do, and
// declines exactly what they refuse: on every valid record, every truncation of one, and
// every one with a byte changed, interning and aliasing or not.
func TestEnqueuedFastPathDecodesAsTheReads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRecord(t)
		if r.Tag != TagEnqueued {
			return
		}
		data := EncodeRecord(r)[9:] // after version and id
		if p := rapid.IntRange(-1, 2*len(data)-1).Draw(t, "cut or flip"); p >= len(data) {
			data[p-len(data)] ^= rapid.Byte().Draw(t, "xor")
		} else if p >= 0 {
			data = data[:p]
		}
		alias := rapid.Bool().Draw(t, "alias")
		var names *interner
		if rapid.Bool().Draw(t, "interned") {
			names = &interner{m: map[string]string{}}
		}
		var fast, slow Record
		ok := (&reader{b: data, alias: alias, names: names}).enqueued(&fast)
		err := enqueuedByReads(reader{b: data, alias: alias, names: names}, &slow)
		if ok != (err == nil) {
			t.Fatalf("fast path ok %v, reads' error %v", ok, err)
		}
		if ok {
			if diff := cmp.Diff(slow, fast); diff != "" {
				t.Fatalf("fast path differs (-reads +fast):\n%s", diff)
			}
		} else if !cmp.Equal(fast, Record{}) {
			t.Fatalf("declining fast path changed the record: %+v", fast)
		}
	})
}

// The interner returns the name it is given, and one string per distinct name: whatever the
// order and however the names share slots of its recent table.
func TestInternerReturnsOneStringPerName(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		names := rapid.SliceOfN(rapid.StringMatching(`[a-c]{0,4}`), 1, 12).Draw(t, "names")
		in := &interner{m: map[string]string{}}
		first := map[string]*byte{}
		for i, k := range rapid.SliceOfN(rapid.IntRange(0, len(names)-1), 1, 200).Draw(t, "order") {
			got := in.intern([]byte(names[k]))
			if got != names[k] {
				t.Fatalf("lookup %d: intern(%q) = %q", i, names[k], got)
			}
			if got == "" {
				continue
			}
			if p, ok := first[got]; ok && p != unsafe.StringData(got) {
				t.Fatalf("lookup %d: a second string for %q", i, got)
			}
			first[got] = unsafe.StringData(got)
		}
	})
}

// A machine loads from a snapshot's payload exactly the state DecodeSnapshot reads from it, and
// refuses what DecodeSnapshot refuses, with the same words; what it loads owns its bytes (the journal reuses the
// record's buffer after the replay function returns).
func TestMachineLoadsTheStateDecodeSnapshotReads(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		data := EncodeSnapshot(genSnapshot(t))
		if p := rapid.IntRange(-1, 2*len(data)-1).Draw(t, "cut or flip"); p >= len(data) {
			data[p-len(data)] ^= rapid.Byte().Draw(t, "xor")
		} else if p >= 0 {
			data = data[:p]
		}
		want, decodeErr := DecodeSnapshot(data)
		cfg, err := Config{Capacity: 4}.WithDefaults()
		if err != nil {
			t.Fatal(err)
		}
		m, err := New(cfg.machine())
		if err != nil {
			t.Fatal(err)
		}
		m.replaying = rapid.Bool().Draw(t, "replaying")
		err = m.Replay(TagSnapshot, true, data)
		switch {
		case decodeErr != nil:
			if err == nil || !strings.HasSuffix(err.Error(), decodeErr.Error()) {
				t.Fatalf("DecodeSnapshot refused (%v), the machine: %v", decodeErr, err)
			}
			return
		case err != nil:
			// Only what a decoded snapshot cannot show on its own: two jobs on one key.
			if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "unique key") {
				t.Fatalf("the machine refused what DecodeSnapshot read: %v", err)
			}
			return
		}
		clear(data)
		m.endReplay()
		got, _ := m.Snapshot(math.MaxInt)
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("loaded state differs (-decoded +loaded):\n%s", diff)
		}
	})
}

// A snapshot refused for a bad byte is refused before the counts after it are believed: a bool
// byte of 2 used to leave the reader reading on, and a window count of 2^32-1 after it was
// allocated (out of memory; found by TestMachineLoadsTheStateDecodeSnapshotReads).
func TestDecodeSnapshotBelievesNoCountAfterABadByte(t *testing.T) {
	data := EncodeSnapshot(Snapshot{NextID: 2, Jobs: []Job{{ID: 1, State: Waiting}}})
	data[21+8+2] = 2                                           // the job's deferred flag, after the header and its id, state and reason
	binary.LittleEndian.PutUint32(data[len(data)-8:], 1<<32-1) // the window count, before the schedule count
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := DecodeSnapshot(data)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrDecode) || !strings.Contains(err.Error(), "bool byte 2") {
		t.Fatalf("decode: %v, want the bad bool byte refused", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("decoding %d bytes allocated %d", len(data), grew)
	}
}

// An Enqueued record's length is known before it is encoded (the RecordMax check runs first).
func TestEnqueuedLenIsTheEncodedLength(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRecord(t)
		if r.Tag != TagEnqueued {
			return
		}
		if got, want := r.enqueuedLen(), len(EncodeRecord(r)); got != want {
			t.Fatalf("enqueuedLen %d, encoded %d bytes", got, want)
		}
	})
}
