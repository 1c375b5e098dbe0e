package forge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand"
	"slices"

	"github.com/sluicehq/sluice/core/runner"
)

// schedRec holds the offsets of a schedule record's fields in its data (or of a snapshot's
// schedule: period is its last period, skip its last job).
type schedRec struct {
	tag               uint8
	name, nameLen     int // the name's bytes and its length
	spec, specLen     int // Set
	target, targetLen int // Set
	catchUp           int // Set
	prio, att, dl, uf int // Set's options
	uniqueLen         int // Set: the length of its unique key
	next, period      int // the presence byte of the next period (Set, Fired), the period (Fired)
	skip              int // Fired
	end               int
}

// parseSchedRecord finds the fields of schedule record data (ver u8 | id u64 | name str | ...);
// ok is false when it does not parse to its end.
func parseSchedRecord(tag uint8, d []byte) (s schedRec, ok bool) {
	off := 9
	u32 := func() int {
		if off+4 > len(d) {
			off = len(d) + 1
			return 0
		}
		v := int(binary.LittleEndian.Uint32(d[off:]))
		off += 4
		return v
	}
	str := func() (at, n int) {
		n = u32()
		at = off
		if n > len(d) {
			off = len(d) + 1
			return at, 0
		}
		off += n
		return at, n
	}
	tm := func() int {
		at := off
		if off < len(d) && d[off] == 1 {
			off += 9
		} else {
			off++
		}
		return at
	}
	s.tag = tag
	s.name, s.nameLen = str()
	switch tag {
	case runner.TagScheduleSet:
		s.spec, s.specLen = str()
		s.catchUp = off
		off++
		s.target, s.targetLen = str()
		str() // payload
		s.prio, s.att, s.dl = off, off+4, off+8
		off += 16
		str() // kind
		_, s.uniqueLen = str()
		s.uf = off
		off += 8
		tm() // anchor
		s.next = tm()
		tm() // at
	case runner.TagScheduleFired:
		s.skip = off
		off++
		s.period = tm()
		s.next = tm()
		tm() // at
	}
	s.end = off
	return s, off == len(d)
}

// Schedule rewrites one schedule record or snapshot of image b (frames wholly before end)
// so that it must be refused, and reseals the frame's CRC; "" when none fits.
func Schedule(r *rand.Rand, b []byte, end int) string {
	type cand struct {
		f   Frame
		rec schedRec
	}
	var cands []cand
	fired := map[string]bool{} // a schedule with a period handled since it was last set anew
	firedAt := map[int]bool{}  // candidates (by frame offset) set again after a period
	keyed := map[string]bool{} // by its last Set record: a schedule whose jobs hold a unique key
	noKey := map[int]bool{}    // candidates (by frame offset) of a schedule known to hold none
	for _, f := range Frames(b, end) {
		p := b[f.Off+FrameHdr : f.Off+FrameHdr+f.N]
		tag, data := p[17], p[PayloadHdr:]
		if f.Flags&SnapFlag != 0 {
			if len(data) >= 4 {
				cands = append(cands, cand{f: f})
			}
			continue
		}
		if tag < runner.TagScheduleSet || tag > runner.TagScheduleFired {
			continue
		}
		rec, ok := parseSchedRecord(tag, data)
		if !ok {
			continue
		}
		name := string(data[rec.name : rec.name+rec.nameLen])
		switch tag {
		case runner.TagScheduleSet:
			firedAt[f.Off] = fired[name]
			keyed[name] = rec.uniqueLen > 0
		case runner.TagScheduleRemoved:
			delete(fired, name)
		case runner.TagScheduleFired:
			fired[name] = true
		}
		if k, ok := keyed[name]; ok && !k {
			noKey[f.Off] = true
		}
		cands = append(cands, cand{f, rec})
	}
	if len(cands) == 0 {
		return ""
	}
	// A kind of frame first (snapshot, set, removal, period), then a frame of that kind: the
	// many periods must not crowd out the few removals.
	kinds := map[uint8][]cand{}
	var tags []uint8
	for _, c := range cands {
		t := c.rec.tag // 0: a snapshot
		if kinds[t] == nil {
			tags = append(tags, t)
		}
		kinds[t] = append(kinds[t], c)
	}
	slices.Sort(tags)
	of := kinds[tags[r.Intn(len(tags))]]
	c := of[r.Intn(len(of))]
	p := b[c.f.Off+FrameHdr : c.f.Off+FrameHdr+c.f.N]
	data := p[PayloadHdr:]
	var what string
	if c.f.Flags&SnapFlag != 0 {
		what = forgeSnapshotSchedules(r, data)
	} else {
		what = forgeSchedRecord(r, c.rec, data, firedAt[c.f.Off], noKey[c.f.Off])
	}
	if what == "" {
		return ""
	}
	fr := b[c.f.Off : c.f.Off+FrameHdr+c.f.N]
	crc := crc32.Update(0, castagnoli, fr[0:4])
	binary.LittleEndian.PutUint32(fr[4:8], crc32.Update(crc, castagnoli, fr[FrameHdr:]))
	return fmt.Sprintf("the frame at byte %d rewritten with %s, its CRC resealed", c.f.Off, what)
}

// unparsable overwrites a spec's bytes (same length) with ones no parser takes.
func unparsable(spec []byte) {
	for i := range spec {
		spec[i] = '?'
	}
}

// forgeSchedRecord forges one field of schedule record data (fields s); reset says a Set
// record that follows a handled period of its schedule (so a next period before it is refused),
// noKey a record of a schedule whose jobs hold no unique key (so a skip for a held key is).
func forgeSchedRecord(r *rand.Rand, s schedRec, data []byte, reset, noKey bool) string {
	id := binary.LittleEndian.Uint64(data[1:9])
	le := binary.LittleEndian
	unknownName := func() {
		data[s.name+s.nameLen-1] = 'X' // the world's schedules are s1, s2, s3
	}
	switch s.tag {
	case runner.TagScheduleSet:
		switch k := r.Intn(5); {
		case k == 0:
			le.PutUint64(data[1:], 1+uint64(r.Intn(1000)))
			return "a schedule set with a job id"
		case k == 1:
			data[s.catchUp] = byte(2 + r.Intn(254))
			return "a schedule set with a catch-up out of range"
		case k == 2 && s.specLen > 0:
			unparsable(data[s.spec : s.spec+s.specLen])
			return "a schedule set with a spec that does not parse"
		case k == 3 && reset && data[s.next] == 1:
			le.PutUint64(data[s.next+1:], 1)
			return "a schedule set again with a next period before its last"
		default:
			switch r.Intn(5) {
			case 0:
				le.PutUint32(data[s.prio:], uint32(int32(runner.PriorityMax+1+r.Intn(1000))))
			case 1:
				le.PutUint32(data[s.att:], 1<<31+uint32(r.Intn(1000)))
			case 2:
				le.PutUint64(data[s.dl:], uint64(-1-int64(r.Intn(1000))))
			case 3:
				le.PutUint64(data[s.uf:], uint64(-1-int64(r.Intn(1000))))
			default:
				if s.uniqueLen == 0 {
					le.PutUint64(data[s.uf:], 1+uint64(r.Intn(1000))) // a window without a unique key
				} else {
					le.PutUint32(data[s.prio:], uint32(int32(runner.PriorityMin-1-r.Intn(1000))))
				}
			}
			return "a schedule set with job options out of range"
		}
	case runner.TagScheduleRemoved:
		if r.Intn(2) == 0 {
			le.PutUint64(data[1:], 1+uint64(r.Intn(1000)))
			return "a schedule removal with a job id"
		}
		unknownName()
		return "the removal of a schedule never set"
	case runner.TagScheduleFired:
		switch k := r.Intn(7); {
		case k == 0:
			unknownName()
			return "a period of a schedule never set"
		case k == 1 && data[s.period] == 1:
			le.PutUint64(data[s.period+1:], le.Uint64(data[s.period+1:])+uint64(1+r.Intn(5))*1e9)
			return "a period other than the schedule's next"
		case k == 2 && id != 0:
			le.PutUint64(data[1:], id+1<<40)
			return "a period naming a job not just enqueued"
		case k == 3 && data[s.next] == 1 && data[s.period] == 1:
			copy(data[s.next+1:s.next+9], data[s.period+1:s.period+9])
			return "a next period equal to the period"
		case k == 4 && id != 0:
			// The job was enqueued, so the period was not missed under "skip" nor its key held
			// by another job; but the job itself holds a key it has, so "held" only without one.
			clear(data[1:9])
			data[s.skip] = byte(runner.SkipMissed)
			if noKey && r.Intn(2) == 0 {
				data[s.skip] = byte(runner.SkipHeld)
			}
			return fmt.Sprintf("a period's job dropped, skipped as %v", runner.Skip(data[s.skip]))
		default:
			// A skip that contradicts the id: any skip with a job, none without one.
			if id != 0 {
				data[s.skip] = byte(1 + r.Intn(4)) // missed, held, refused, or none known
				if data[s.skip] == 4 {
					data[s.skip] += byte(r.Intn(252))
				}
			} else {
				data[s.skip] = 0
			}
			return "a period with a skip that contradicts its job"
		}
	}
	return ""
}

// forgeSnapshotSchedules forges the schedules that end snapshot data (| count u32 | count ×
// schedule |): a count the data cannot hold, or one field of one schedule.
func forgeSnapshotSchedules(r *rand.Rand, data []byte) string {
	at, ss := snapshotSchedules(data)
	le := binary.LittleEndian
	if at < 0 || len(ss) == 0 || r.Intn(4) == 0 {
		if at < 0 {
			return ""
		}
		if len(ss) > 0 && r.Intn(2) == 0 {
			le.PutUint32(data[at:], uint32(len(ss)+1)) // within the bound on the count, past the data
			return "a snapshot schedule count one more than the schedules it holds"
		}
		le.PutUint32(data[at:], 1<<30+uint32(r.Intn(1000)))
		return "a snapshot schedule count its data cannot hold"
	}
	i := r.Intn(len(ss))
	s := ss[i]
	switch k := r.Intn(6); {
	case k == 0 && i > 0 && s.nameLen == ss[i-1].nameLen:
		copy(data[s.name:s.name+s.nameLen], data[ss[i-1].name:ss[i-1].name+s.nameLen])
		return "a snapshot's schedules out of order"
	case k == 1:
		data[s.catchUp] = byte(2 + r.Intn(254))
		return "a snapshot schedule with a catch-up out of range"
	case k == 2 && data[s.next] == 1 && data[s.period] == 1:
		copy(data[s.next+1:s.next+9], data[s.period+1:s.period+9])
		return "a snapshot schedule whose next period is its last"
	case k == 3:
		le.PutUint64(data[s.skip:], 1<<40+uint64(r.Intn(1000)))
		return "a snapshot schedule whose last job is past the next id"
	case k == 4 && s.specLen > 0:
		unparsable(data[s.spec : s.spec+s.specLen])
		return "a snapshot schedule with a spec that does not parse"
	default:
		le.PutUint32(data[s.prio:], uint32(int32(runner.PriorityMin-1-r.Intn(1000))))
		return "a snapshot schedule with job options out of range"
	}
}

// snapshotSchedules finds the schedules section of snapshot data: the offset of its count and
// each schedule's fields (period: the last period's presence byte; skip: the last job u64),
// or -1. The section is the data's end: a count, then that many schedules ending exactly there.
func snapshotSchedules(data []byte) (int, []schedRec) {
	if len(data) < 4 {
		return -1, nil
	}
	if binary.LittleEndian.Uint32(data[len(data)-4:]) == 0 {
		if at, ss := findSchedules(data); at >= 0 {
			return at, ss
		}
		return len(data) - 4, nil
	}
	return findSchedules(data)
}

// findSchedules looks for a count followed by schedules named like the world's ("s" and a
// digit) that parse to the data's end.
func findSchedules(data []byte) (int, []schedRec) {
	pat := []byte{2, 0, 0, 0, 's'}
	for from := 0; ; {
		i := bytes.Index(data[from:], pat)
		if i < 0 {
			return -1, nil
		}
		at := from + i - 4
		from += i + 1
		if at < 0 {
			continue
		}
		if ss, ok := parseSnapshotSchedules(data, at); ok {
			return at, ss
		}
	}
}

func parseSnapshotSchedules(d []byte, at int) ([]schedRec, bool) {
	n := int(binary.LittleEndian.Uint32(d[at:]))
	if n == 0 || n > 3 {
		return nil, false
	}
	off := at + 4
	bad := false
	u32 := func() int {
		if off+4 > len(d) {
			bad = true
			return 0
		}
		v := int(binary.LittleEndian.Uint32(d[off:]))
		off += 4
		return v
	}
	str := func() (int, int) {
		n := u32()
		a := off
		if bad || n > len(d)-off {
			bad = true
			return a, 0
		}
		off += n
		return a, n
	}
	tm := func() int {
		a := off
		if off < len(d) && d[off] == 1 {
			off += 9
		} else {
			off++
		}
		return a
	}
	var ss []schedRec
	for range n {
		var s schedRec
		s.name, s.nameLen = str()
		s.spec, s.specLen = str()
		s.catchUp = off
		off++
		str() // target
		str() // payload
		s.prio, s.att, s.dl = off, off+4, off+8
		off += 16
		str() // kind
		str() // unique
		s.uf = off
		off += 8
		tm()            // anchor
		s.next = tm()   // next
		s.period = tm() // last
		tm()            // last at
		s.skip = off    // last job
		off += 16       // last job, fired
		if bad || off > len(d) {
			return nil, false
		}
		ss = append(ss, s)
	}
	return ss, off == len(d)
}

// ScheduleResized forges a schedule record before end of image b by leaving a field out
// (a name of no bytes, a set with an empty target or without a next period), which changes the
// frame's length and so needs a rewrite of the whole file: it returns the new image and what
// it did, or nil.
func ScheduleResized(r *rand.Rand, b []byte, end int) ([]byte, string) {
	type cand struct {
		f   Frame
		rec schedRec
	}
	var cands []cand
	for _, f := range Frames(b, end) {
		p := b[f.Off+FrameHdr : f.Off+FrameHdr+f.N]
		if f.Flags&SnapFlag != 0 || p[17] < runner.TagScheduleSet || p[17] > runner.TagScheduleFired {
			continue
		}
		if rec, ok := parseSchedRecord(p[17], p[PayloadHdr:]); ok {
			cands = append(cands, cand{f, rec})
		}
	}
	if len(cands) == 0 {
		return nil, ""
	}
	c := cands[r.Intn(len(cands))]
	p := b[c.f.Off+FrameHdr : c.f.Off+FrameHdr+c.f.N]
	data, s := p[PayloadHdr:], c.rec
	cut := func(from, to int, with ...byte) []byte {
		return slices.Concat(data[:from], with, data[to:])
	}
	var nd []byte
	var what string
	switch k := r.Intn(3); {
	case k == 1 && s.tag == runner.TagScheduleSet:
		nd, what = cut(s.target-4, s.target+s.targetLen, 0, 0, 0, 0), "a schedule set with an empty target"
	case k == 2 && s.tag == runner.TagScheduleSet && data[s.next] == 1:
		nd, what = cut(s.next, s.next+9, 0), "a schedule set without a next period"
	default:
		nd, what = cut(s.name-4, s.name+s.nameLen, 0, 0, 0, 0), "a schedule record with an empty name"
	}
	payload := slices.Concat(p[:PayloadHdr], nd)
	fr := binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))
	crc := crc32.Update(0, castagnoli, fr)
	fr = binary.LittleEndian.AppendUint32(fr, crc32.Update(crc, castagnoli, payload))
	img := slices.Concat(b[:c.f.Off], fr, payload, b[c.f.Off+FrameHdr+c.f.N:])
	return img, fmt.Sprintf("the frame at byte %d rewritten with %s, %d bytes shorter, its CRC resealed", c.f.Off, what, len(data)-len(nd))
}
