package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/sluiceui"
)

// each calls fn for every job that matches f, page after page.
func each(ctx context.Context, src sluiceui.Source, f sluiceui.Filter, fn func(sluiceui.Job)) error {
	f.Limit = 1000
	for {
		p, err := src.List(ctx, f)
		if err != nil {
			return err
		}
		for _, j := range p.Jobs {
			fn(j)
		}
		if !p.More {
			return nil
		}
		f.After = p.Next
	}
}

type statsOut struct {
	Jobs        int            `json:"jobs"`
	LastID      uint64         `json:"last_id"`
	States      map[string]int `json:"states"`
	Interrupted []uint64       `json:"interrupted"`
}

func stats(ctx context.Context, src sluiceui.Source, o options, stdout io.Writer) (int, error) {
	st, err := src.Stats(ctx)
	if err != nil {
		return exitFinding, err
	}
	out := statsOut{LastID: st.LastID, States: map[string]int{}, Interrupted: []uint64{}}
	for _, s := range sluiceui.States {
		out.States[s.String()] = 0
	}
	if err := each(ctx, src, sluiceui.Filter{}, func(j sluiceui.Job) {
		out.Jobs++
		out.States[j.State.String()]++
		if j.Interrupted {
			out.Interrupted = append(out.Interrupted, j.ID)
		}
	}); err != nil {
		return exitFinding, err
	}
	if o.json {
		return exitOK, writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs\t%d\t(last id %d)\n", out.Jobs, out.LastID)
	for _, s := range sluiceui.States {
		fmt.Fprintf(tw, "%s\t%d\n", s, out.States[s.String()])
	}
	live, _ := lockHeld(o.dir)
	if live {
		fmt.Fprintln(tw, "note\ta running runner holds the directory: these are its jobs as of its last sync (running jobs show as interrupted)\t")
	}
	if len(out.Interrupted) > 0 {
		fmt.Fprintf(tw, "interrupted\t%d\t(running at the last write: the next Open records each as a failed attempt; ids %s)\n",
			len(out.Interrupted), idList(out.Interrupted))
	}
	return exitOK, tw.Flush()
}

func idList(ids []uint64) string {
	var b strings.Builder
	for i, id := range ids {
		if i == 10 {
			fmt.Fprintf(&b, " and %d more", len(ids)-10)
			break
		}
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprint(&b, id)
	}
	return b.String()
}

// jobOut is a job in JSON.
type jobOut struct {
	ID            uint64       `json:"id"`
	Kind          string       `json:"kind,omitempty"`
	Target        string       `json:"target"`
	State         string       `json:"state"`
	Attempts      int          `json:"attempts"`
	FirstDue      time.Time    `json:"first_due"`
	Due           *time.Time   `json:"due,omitempty"`
	Reason        string       `json:"reason,omitempty"`
	LastErr       string       `json:"last_error,omitempty"`
	Priority      int          `json:"priority"`
	Unique        string       `json:"unique,omitempty"`
	Interrupted   bool         `json:"interrupted,omitempty"`
	Payload       *string      `json:"payload,omitempty"`        // when it is UTF-8 text
	PayloadBase64 []byte       `json:"payload_base64,omitempty"` // otherwise
	History       []attemptOut `json:"history"`
}

type attemptOut struct {
	Number  int        `json:"number"`
	Start   time.Time  `json:"start"`
	End     *time.Time `json:"end,omitempty"`
	Outcome string     `json:"outcome"`
	Err     string     `json:"error,omitempty"`
}

func jobJSON(j sluiceui.Job) jobOut {
	out := jobOut{ID: j.ID, Kind: j.Kind, Target: j.Target, State: j.State.String(), Attempts: j.Attempts,
		FirstDue: j.FirstDue.UTC(), Reason: string(j.Reason), LastErr: j.LastErr, Priority: j.Priority,
		Unique: j.Unique, Interrupted: j.Interrupted, History: []attemptOut{}}
	if !j.State.Terminal() {
		due := j.Due.UTC()
		out.Due = &due
	}
	if utf8.Valid(j.Payload) {
		s := string(j.Payload)
		out.Payload = &s
	} else {
		out.PayloadBase64 = j.Payload
	}
	for _, a := range j.History {
		ao := attemptOut{Number: a.Number, Start: a.Start.UTC(), Outcome: a.Outcome, Err: a.Err}
		if !a.End.IsZero() {
			end := a.End.UTC()
			ao.End = &end
		}
		out.History = append(out.History, ao)
	}
	return out
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

type pageOut struct {
	Jobs []jobOut `json:"jobs"`
	Next uint64   `json:"next"`
	More bool     `json:"more"`
}

func jobs(ctx context.Context, src sluiceui.Source, o options, stdout, stderr io.Writer) (int, error) {
	var page sluiceui.Page
	if o.all {
		if err := each(ctx, src, o.filter, func(j sluiceui.Job) { page.Jobs = append(page.Jobs, j) }); err != nil {
			return exitFinding, err
		}
	} else {
		var err error
		if page, err = src.List(ctx, o.filter); err != nil {
			return exitFinding, err
		}
	}
	if o.json {
		out := pageOut{Jobs: []jobOut{}, Next: page.Next, More: page.More}
		for _, j := range page.Jobs {
			out.Jobs = append(out.Jobs, jobJSON(j))
		}
		return exitOK, writeJSON(stdout, out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tKIND\tTARGET\tATTEMPTS\tDUE\tREASON\tLAST ERROR")
	for _, j := range page.Jobs {
		due := "-"
		if !j.State.Terminal() {
			due = when(j.Due)
		}
		state := j.State.String()
		if j.Interrupted {
			state += "*"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", j.ID, state, dash(j.Kind), j.Target, j.Attempts, due,
			dash(string(j.Reason)), dash(oneLine(j.LastErr, 60)))
	}
	if err := tw.Flush(); err != nil {
		return exitFinding, err
	}
	if page.More {
		fmt.Fprintf(stderr, "more: %s\n", nextCommand(o, page.Next))
	}
	return exitOK, nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nextCommand is the command that prints the page after next.
func nextCommand(o options, next uint64) string {
	args := []string{"sluice jobs --dir", shellQuote(o.dir)}
	if o.state != "" {
		args = append(args, "--state", o.state)
	}
	if o.filter.Kind != "" {
		args = append(args, "--kind", shellQuote(o.filter.Kind))
	}
	if o.filter.Target != "" {
		args = append(args, "--target", shellQuote(o.filter.Target))
	}
	if o.filter.Limit != 50 {
		args = append(args, "--limit", fmt.Sprint(o.filter.Limit))
	}
	if o.json {
		args = append(args, "--json")
	}
	return strings.Join(append(args, "--after", fmt.Sprint(next)), " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func show(ctx context.Context, src sluiceui.Source, o options, stdout io.Writer) (int, error) {
	j, err := src.Get(ctx, o.id)
	if errors.Is(err, sluice.ErrNotFound) {
		return exitFinding, fmt.Errorf("%w (list the ids with `sluice jobs --dir %s`)", err, shellQuote(o.dir))
	}
	if err != nil {
		return exitFinding, err
	}
	if o.json {
		return exitOK, writeJSON(stdout, jobJSON(j))
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%d\n", j.ID)
	if j.Kind != "" {
		fmt.Fprintf(tw, "kind\t%s\n", j.Kind)
	}
	fmt.Fprintf(tw, "target\t%s\n", j.Target)
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	if j.Interrupted {
		fmt.Fprintln(tw, "interrupted\tan attempt was running at the last write: the next Open records it as failed")
	}
	fmt.Fprintf(tw, "attempts\t%d\n", j.Attempts)
	if !j.State.Terminal() {
		fmt.Fprintf(tw, "due\t%s\n", when(j.Due))
	}
	fmt.Fprintf(tw, "first due\t%s\n", when(j.FirstDue))
	if j.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", j.Reason)
	}
	if j.LastErr != "" {
		fmt.Fprintf(tw, "last error\t%s\n", oneLine(j.LastErr, 200))
	}
	fmt.Fprintf(tw, "priority\t%d\n", j.Priority)
	if j.Unique != "" {
		fmt.Fprintf(tw, "unique\t%s\n", j.Unique)
	}
	if utf8.Valid(j.Payload) {
		fmt.Fprintf(tw, "payload\t%s\n", oneLine(string(j.Payload), 200))
	} else {
		fmt.Fprintf(tw, "payload\t(%d bytes) %x\n", len(j.Payload), j.Payload)
	}
	if err := tw.Flush(); err != nil {
		return exitFinding, err
	}
	fmt.Fprintln(stdout, "\nattempts (the last 10, oldest first):")
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSTART\tEND\tTOOK\tOUTCOME\tERROR")
	for _, a := range j.History {
		took := "-"
		if !a.End.IsZero() {
			took = a.End.Sub(a.Start).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", a.Number, when(a.Start), when(a.End), took, a.Outcome, dash(oneLine(a.Err, 80)))
	}
	if len(j.History) == 0 {
		fmt.Fprintln(tw, "-\tnone yet\t\t\t\t")
	}
	return exitOK, tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// serve serves the read-only UI until ctx ends.
func serve(ctx context.Context, src sluiceui.Source, o options, stdout io.Writer) (int, error) {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return exitFinding, fmt.Errorf("--addr %s: %w", o.addr, err)
	}
	srv := &http.Server{Handler: sluiceui.New(src, sluiceui.Options{ReadOnly: true}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "serving %s read-only on http://%s/ (interrupt to stop)\n", o.dir, ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return exitFinding, err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return exitOK, srv.Shutdown(sctx)
}
