package journal

import (
	"fmt"
	"strings"
)

// Describe renders the bytes of a journal file frame by frame, deterministically, for traces,
// scenario files and debugging. It never panics; it stops at the first bad frame and says
// how many bytes follow.
func Describe(b []byte) string {
	var sb strings.Builder
	if len(b) == 0 {
		return "empty\n"
	}
	h, reason := decodeHeader(b)
	if reason != "" {
		fmt.Fprintf(&sb, "bad header (%s), %d bytes\n", reason, len(b))
		return sb.String()
	}
	kind := "plain"
	if h.flags&headerFlagSnapshot != 0 {
		kind = "snapshot"
	}
	switch h.marked {
	case markSet:
		fmt.Fprintf(&sb, "header v%d %s, closed cleanly at %d bytes, last LSN %d\n", h.version, kind, h.mark.size, h.mark.last)
	case markTorn:
		fmt.Fprintf(&sb, "header v%d %s, torn clean-close mark\n", h.version, kind)
	default:
		fmt.Fprintf(&sb, "header v%d %s\n", h.version, kind)
	}
	for off := headerLen; off < len(b); {
		f, ok := decodeFrame(b, off)
		if !ok && allZero(b[off:]) {
			fmt.Fprintf(&sb, "@%d zeros, %d bytes to the end\n", off, len(b)-off)
			break
		}
		if !ok {
			fmt.Fprintf(&sb, "@%d bad frame, %d bytes to the end\n", off, len(b)-off)
			break
		}
		fmt.Fprintf(&sb, "@%d lsn=%d batch=%d tag=%d", off, f.lsn, f.batch, f.tag)
		if f.flags&flagSnapshot != 0 {
			sb.WriteString(" snapshot")
		}
		if f.flags&flagEnd != 0 {
			sb.WriteString(" end")
		}
		fmt.Fprintf(&sb, " %q\n", truncate(f.data, 40))
		off = f.next
	}
	fmt.Fprintf(&sb, "size %d\n", len(b))
	return sb.String()
}

func truncate(b []byte, n int) string {
	if len(b) <= n {
		return string(b)
	}
	return string(b[:n]) + "..."
}
