package faults

import "fmt"

// Disk holds the probabilities of the simulated disk's random faults (sim/disk). Each is the
// chance, in [0, 1], that one operation of that kind fails; the zero value injects nothing.
// The disk draws from its own seeded stream only for a probability above zero, so turning a
// fault off does not shift the other draws of a run.
type Disk struct {
	// WriteErr: a File.Write fails after appending a random strict prefix of its bytes (as a
	// real short write with ENOSPC or EIO may).
	WriteErr float64
	// SyncErr: a File.Sync fails. The writes it should have covered stay undecided: a crash
	// may lose, keep or tear each of them, even after a later Sync succeeds (Linux marks the
	// pages clean after a failed fsync; this is why fsync must never be retried).
	SyncErr float64
	// RenameErr: an FS.Rename fails without effect.
	RenameErr float64
	// BitFlip: at each Crash, per surviving file with synced data, one random bit of its synced
	// data flips (media corruption; only profiles that expect open to refuse should set it).
	BitFlip float64
	// CreateErr, RemoveErr, TruncateErr: the call fails without effect.
	CreateErr, RemoveErr, TruncateErr float64
	// SyncDirErr: an FS.SyncDir fails; the directory changes it should have covered are
	// undecided until the next crash (an in-order prefix of them survives), unless a later
	// SyncDir succeeds.
	SyncDirErr float64
	// DirPersist: at a crash, the chance that directory changes never made durable by
	// SyncDir survive anyway (an in-order prefix of random length, as a journaling file system
	// may commit them). Zero gives the strict rule: unsynced creates, renames and removes are
	// all rolled back.
	DirPersist float64

	// The read side, drawn from the disk's own read stream (so they shift none of the draws
	// above): OpenErr, StatErr, SizeErr: FS.Open, FS.Stat or File.Size fails; ReadErr: a
	// File.ReadAt fails, half the time after a short read of a random strict prefix;
	// CloseErr: a File.Close reports a failure (the file is released all the same, as
	// close(2) does).
	OpenErr, StatErr, SizeErr, ReadErr, CloseErr float64

	// The journal families, drawn from the disk's third stream (so they shift none of the
	// draws above). ShortWrite: a File.Write or WriteAt writes a random strict prefix of its
	// bytes and reports that count without an error (a port breaching io.Writer's contract;
	// os.File never does). LeftoverErr: P(an open that will find a leftover <name>.compact
	// meets a failing removal of it, or a failing directory sync after the removal); the world
	// arms it (FailNext), the disk does not draw it.
	ShortWrite, LeftoverErr float64
}

// Reads reports whether any read-side fault is on.
func (f Disk) Reads() bool { return f.OpenErr+f.StatErr+f.SizeErr+f.ReadErr+f.CloseErr > 0 }

// Validate reports a probability outside [0, 1].
func (f Disk) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{
		{"WriteErr", f.WriteErr}, {"SyncErr", f.SyncErr}, {"RenameErr", f.RenameErr},
		{"BitFlip", f.BitFlip}, {"CreateErr", f.CreateErr},
		{"RemoveErr", f.RemoveErr}, {"TruncateErr", f.TruncateErr},
		{"SyncDirErr", f.SyncDirErr}, {"DirPersist", f.DirPersist},
		{"OpenErr", f.OpenErr}, {"StatErr", f.StatErr}, {"SizeErr", f.SizeErr},
		{"ReadErr", f.ReadErr}, {"CloseErr", f.CloseErr},
		{"ShortWrite", f.ShortWrite}, {"LeftoverErr", f.LeftoverErr},
	} {
		if !(p.v >= 0 && p.v <= 1) {
			return fmt.Errorf("faults: disk probability %s = %v, want 0..1", p.name, p.v)
		}
	}
	return nil
}

// String renders the non-zero probabilities in a fixed order, for traces and summaries.
func (f Disk) String() string {
	s := ""
	add := func(name string, v float64) {
		if v == 0 {
			return
		}
		if s != "" {
			s += " "
		}
		s += fmt.Sprintf("%s=%g", name, v)
	}
	add("write", f.WriteErr)
	add("sync", f.SyncErr)
	add("rename", f.RenameErr)
	add("bitflip", f.BitFlip)
	add("create", f.CreateErr)
	add("remove", f.RemoveErr)
	add("truncate", f.TruncateErr)
	add("syncdir", f.SyncDirErr)
	add("dirpersist", f.DirPersist)
	add("open", f.OpenErr)
	add("stat", f.StatErr)
	add("size", f.SizeErr)
	add("read", f.ReadErr)
	add("close", f.CloseErr)
	add("shortwrite", f.ShortWrite)
	add("leftover", f.LeftoverErr)
	if s == "" {
		return "none"
	}
	return s
}
