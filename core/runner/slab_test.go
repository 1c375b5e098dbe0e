package runner

import (
	"testing"
	"unsafe"
)

// A job slab is a large object, which the allocator rounds up to 8 KiB pages: jobSlabLen
// must fill its pages, or a change of the job's size wastes up to a page per slab.
func TestJobSlabFillsItsPages(t *testing.T) {
	const page = 8 << 10
	size := unsafe.Sizeof(job{}) * jobSlabLen
	if waste := (page - size%page) % page; waste > unsafe.Sizeof(job{}) {
		t.Fatalf("%d jobs of %d bytes take %d bytes: %d wasted of the last page; make jobSlabLen fit",
			jobSlabLen, unsafe.Sizeof(job{}), size, waste)
	}
}
