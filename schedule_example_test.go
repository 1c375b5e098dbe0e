package sluice_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/benbjohnson/clock"

	"github.com/sluicehq/sluice"
)

type report struct{ Team string }

// A schedule enqueues one job per period, durably: here a report every day at 09:00 UTC. The
// mock clock stands in for the passing of time; a program calls Schedule at each start (an
// unchanged schedule is left as it is) and then Run.
func ExampleKind_Schedule() {
	dir, err := os.MkdirTemp("", "sluice-schedule")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	clk := clock.NewMock()
	clk.Set(time.Date(2026, 3, 2, 8, 0, 0, 0, time.UTC))

	send := func(ctx context.Context, j sluice.Job[report]) error {
		fmt.Println("report for", j.Payload.Team, "of the period", j.Due.Format("Jan 2 15:04"))
		return nil
	}
	reports, err := sluice.Open(dir, sluice.Config{Capacity: 1, Clock: clk}, sluice.JSON[report](), send)
	if err != nil {
		log.Fatal(err)
	}
	defer reports.Close()

	ctx := context.Background()
	if err := reports.Schedule(ctx, "daily-ops", "0 9 * * *", "reports", report{Team: "ops"}); err != nil {
		log.Fatal(err)
	}
	clk.Add(time.Hour) // 09:00: the period is due
	if err := reports.DrainDue(ctx); err != nil {
		log.Fatal(err)
	}
	ss, err := reports.Schedules(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range ss {
		fmt.Printf("%s %q fired %d, next %s\n", s.Name, s.Spec, s.Fired, s.Next.Format("Jan 2 15:04"))
	}
	// Output:
	// report for ops of the period Mar 2 09:00
	// daily-ops "0 9 * * *" fired 1, next Mar 3 09:00
}
