package disk

import (
	"io"

	"github.com/sluicehq/sluice/core"
)

// ReadAll reads a whole file as a simulator's inspections do: past the read-side faults.
func (d *Disk) ReadAll(name string) (b []byte, err error) {
	d.WithoutReadFaults(func() { b, err = core.ReadFile(d, name) })
	return b, err
}

// ReadHead reads at most the first n bytes of a file, past the read-side faults.
func (d *Disk) ReadHead(name string, n int) (b []byte, err error) {
	d.WithoutReadFaults(func() {
		var f core.File
		if f, err = d.Open(name); err != nil {
			return
		}
		defer f.Close()
		b = make([]byte, n)
		var k int
		k, err = f.ReadAt(b, 0)
		b = b[:k]
		if err == io.EOF {
			err = nil
		}
	})
	return b, err
}

// WriteSynced makes name hold data, durable (AdoptSynced, or the calls themselves); the disk
// may keep data, which the caller must not touch again.
func (d *Disk) WriteSynced(name string, data []byte) error {
	if d.AdoptSynced(name, data) {
		return nil
	}
	f, err := d.Create(name)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return d.SyncDir()
}
