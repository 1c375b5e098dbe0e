package runner

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// scheduleCmd runs the scenario commands of periodic jobs (scenario_test.go lists them).
func scheduleCmd(t *testing.T, w *world, d *datadriven.TestData) (string, error) {
	switch d.Cmd {
	case "schedule":
		cu := CatchUpOne
		if argStr(t, d, "catch-up", "one") == "skip" {
			cu = CatchUpSkip
		}
		tk, err := w.e.SetSchedule(w.now, NewSchedule{Name: argStr(t, d, "name", ""), Spec: argStr(t, d, "spec", ""),
			Target: argStr(t, d, "target", "a"), Payload: []byte(argStr(t, d, "payload", "")), CatchUp: cu,
			Opts: Opts{Priority: argInt(t, d, "priority", 0), Unique: argStr(t, d, "unique", "")}})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ticket %d (not yet durable)\n", tk), nil
	case "unschedule":
		tk, err := w.e.RemoveSchedule(argStr(t, d, "name", ""))
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("ticket %d (not yet durable)\n", tk), nil
	case "schedules":
		var b strings.Builder
		for _, s := range w.e.Schedules() {
			b.WriteString(DescribeSchedule(s, epoch))
			b.WriteByte('\n')
		}
		if b.Len() == 0 {
			return "no schedules\n", nil
		}
		return b.String(), nil
	}
	t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	return "", nil
}
