package pool

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAcquireRelease(t *testing.T) {
	p := New(2)
	var got []bool
	got = append(got, p.Acquire(), p.Acquire(), p.Acquire())
	p.Release()
	got = append(got, p.Acquire())
	if diff := cmp.Diff([]bool{true, true, false, true}, got); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if p.Free() != 0 || p.Used() != 2 || p.Capacity() != 2 {
		t.Fatalf("free=%d used=%d cap=%d", p.Free(), p.Used(), p.Capacity())
	}
	if err := p.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestMisusePanics(t *testing.T) {
	for name, f := range map[string]func(){
		"capacity 0":         func() { New(0) },
		"release unacquired": func() { New(1).Release() },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
