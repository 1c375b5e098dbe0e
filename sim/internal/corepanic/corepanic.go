// Package corepanic tells a panic of the machines under test (core/) from one of the simulator.
package corepanic

import (
	"runtime"
	"strings"
)

// corePrefix is the import path prefix of the machines the world tests.
const corePrefix = "github.com/sluicehq/sluice/core/"

// Panicker names the function of the code under test (a package under core/) that raised
// the panic being recovered, or "" when it began elsewhere (the simulator, its disk or queue).
// A panic in a machine is a defect of the machine, reported as an invariant failure, not as a
// simulator fault. Call it from the deferred function that recovers, before it returns.
func Panicker() string {
	pc := make([]uintptr, 64)
	frames := runtime.CallersFrames(pc[:runtime.Callers(2, pc)])
	for inPanic := false; ; {
		f, more := frames.Next()
		switch {
		case f.Function == "runtime.gopanic":
			inPanic = true
		case inPanic && strings.HasPrefix(f.Function, "runtime."):
			// the runtime's own frames of a fault (panicmem, sigpanic, panicIndex)
		case inPanic:
			if strings.HasPrefix(f.Function, corePrefix) {
				return f.Function
			}
			return ""
		}
		if !more {
			return ""
		}
	}
}
