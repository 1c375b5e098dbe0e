package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/sluicehq/sluice"
	"github.com/sluicehq/sluice/internal/display"
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
	Paused      []string       `json:"paused"` // kinds
}

func stats(ctx context.Context, src sluiceui.Source, o options, stdout io.Writer) (int, error) {
	st, err := src.Stats(ctx)
	if err != nil {
		return exitFinding, err
	}
	paused, err := src.Paused(ctx)
	if err != nil {
		return exitFinding, err
	}
	out := statsOut{LastID: st.LastID, States: map[string]int{}, Interrupted: []uint64{}, Paused: append([]string{}, paused...)}
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
	// The rows are a table; the notes are free text after it (in the table, a long note
	// would widen a column and pad every row with spaces).
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs\t%d\t(last id %d)\n", out.Jobs, out.LastID)
	for _, s := range sluiceui.States {
		fmt.Fprintf(tw, "%s\t%d\n", s, out.States[s.String()])
	}
	if len(out.Interrupted) > 0 {
		fmt.Fprintf(tw, "interrupted\t%d\n", len(out.Interrupted))
	}
	if len(out.Paused) > 0 {
		fmt.Fprintf(tw, "paused kinds\t%d\n", len(out.Paused))
	}
	if err := tw.Flush(); err != nil {
		return exitFinding, err
	}
	if len(out.Paused) > 0 {
		names := make([]string, len(out.Paused))
		for i, k := range out.Paused {
			names[i] = term(k, 40)
		}
		fmt.Fprintf(stdout, "\npaused: %s: their jobs start no attempt until resumed (`sluice resume --dir %s %s`)\n",
			strings.Join(names, ", "), shellQuote(o.dir), shellQuote(out.Paused[0]))
	}
	if len(out.Interrupted) > 0 {
		fmt.Fprintf(stdout, "\ninterrupted: running at the last write (ids %s)", idList(out.Interrupted))
		if live, _ := lockHeld(o.dir); live {
			fmt.Fprintln(stdout, ": a running runner holds the directory, so these are probably attempts running now, seen as of its last sync")
		} else {
			fmt.Fprintln(stdout, ": the next Open records each as a failed attempt")
		}
	} else if live, _ := lockHeld(o.dir); live {
		fmt.Fprintln(stdout, "\nnote: a running runner holds the directory: these are its jobs as of its last sync")
	}
	return exitOK, nil
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
	Key           string       `json:"key,omitempty"`
	Group         string       `json:"sequence,omitempty"`
	Hold          bool         `json:"hold,omitempty"`
	KeyRunning    int          `json:"key_running,omitempty"`
	Blocked       string       `json:"blocked,omitempty"`
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
		Unique: j.Unique, Interrupted: j.Interrupted, Key: j.Key, Group: j.Group, Hold: j.Hold, KeyRunning: j.KeyRunning,
		Blocked: j.Blocked, History: []attemptOut{}}
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

// term is how the CLI shows a journaled string (a target, a kind, a key, an error, a
// payload): control bytes, format characters and invalid UTF-8 as visible escapes, so nothing
// reaches the terminal as a control sequence or a forged row, and cut to n bytes with the
// full length stated. --json prints the strings as they are, JSON-escaped.
func term(s string, n int) string { return display.Text(s, n) }

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
	// A BLOCKED column only when a row has something in it: most directories use no pause or
	// sequence, and an empty column would only widen the table.
	blocked := slices.ContainsFunc(page.Jobs, func(j sluiceui.Job) bool { return j.Blocked != "" })
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	head := "ID\tSTATE\tKIND\tTARGET\tATTEMPTS\tDUE\tREASON\tLAST ERROR"
	if blocked {
		head += "\tBLOCKED"
	}
	fmt.Fprintln(tw, head)
	for _, j := range page.Jobs {
		due := "-"
		if !j.State.Terminal() {
			due = when(j.Due)
		}
		state := j.State.String()
		if j.Interrupted {
			state += "*"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s", j.ID, state, dash(term(j.Kind, 40)), term(j.Target, 60), j.Attempts, due,
			dash(string(j.Reason)), dash(term(lastErr(j), 60)))
		if blocked {
			fmt.Fprintf(tw, "\t%s", dash(term(j.Blocked, 80)))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return exitFinding, err
	}
	if page.More {
		fmt.Fprintf(stderr, "more: %s\n", nextCommand(o, page.Next))
	}
	return exitOK, nil
}

// showMax is how many bytes of a string show prints; --json prints it all.
const showMax = 200

func cutMark(n, max int) string {
	if n <= max {
		return ""
	}
	return display.Cut(n)
}

// lastErr is the job's last error where it explains its state: a succeeded job's last error
// is from an earlier attempt (its history keeps it).
func lastErr(j sluiceui.Job) string {
	if j.State == sluice.StateSucceeded {
		return ""
	}
	return j.LastErr
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
		args = append(args, "--state", shellQuote(o.state))
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
	fmt.Fprintf(tw, "kind\t%s\n", dash(term(j.Kind, showMax)))
	fmt.Fprintf(tw, "target\t%s\n", term(j.Target, showMax))
	fmt.Fprintf(tw, "state\t%s\n", j.State)
	if j.Interrupted {
		fmt.Fprintln(tw, "interrupted\tan attempt was running at the last write: the next Open records it as failed")
	}
	fmt.Fprintf(tw, "attempts\t%d\n", j.Attempts)
	if !j.State.Terminal() {
		fmt.Fprintf(tw, "due\t%s\n", when(j.Due))
	}
	if j.Blocked != "" {
		fmt.Fprintf(tw, "blocked\t%s\n", term(j.Blocked, showMax))
	} else if why := sluiceui.WaitReason(j, nil, o.now(), false); why != "" {
		fmt.Fprintf(tw, "waits\t%s\n", why)
	}
	if j.Key != "" {
		fmt.Fprintf(tw, "key\t%s (%d of its kind's attempts with this key running at the last write)\n", term(j.Key, showMax), j.KeyRunning)
	}
	if j.Group != "" {
		hold := ""
		switch {
		case j.Hold && j.State == sluice.StateDead:
			hold = " (dead, it holds the sequence: its later jobs wait until it is retried or cancelled)"
		case j.Hold:
			hold = " (should it die, it holds the sequence until retried or cancelled)"
		}
		fmt.Fprintf(tw, "sequence\t%s%s\n", term(j.Group, showMax), hold)
	}
	fmt.Fprintf(tw, "first due\t%s\n", when(j.FirstDue))
	if j.Reason != "" {
		fmt.Fprintf(tw, "reason\t%s\n", j.Reason)
	}
	if e := lastErr(j); e != "" {
		fmt.Fprintf(tw, "last error\t%s\n", term(e, showMax))
	}
	fmt.Fprintf(tw, "priority\t%d\n", j.Priority)
	if j.Unique != "" {
		fmt.Fprintf(tw, "unique\t%s\n", term(j.Unique, showMax))
	}
	if utf8.Valid(j.Payload) {
		fmt.Fprintf(tw, "payload\t%s\n", term(string(j.Payload), showMax))
	} else {
		fmt.Fprintf(tw, "payload\t(%d bytes, hex) %x%s\n", len(j.Payload), j.Payload[:min(len(j.Payload), showMax/2)], cutMark(len(j.Payload), showMax/2))
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
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", a.Number, when(a.Start), when(a.End), took, a.Outcome, dash(term(a.Err, 80)))
	}
	if len(j.History) == 0 {
		fmt.Fprintln(tw, "-\tnone yet")
	}
	return exitOK, tw.Flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// checkAddr refuses a listen address other hosts can reach unless remote (--allow-remote):
// the served pages show every job, payloads included, with no authentication.
func checkAddr(addr string, remote bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--addr %s: want HOST:PORT, such as 127.0.0.1:8080: %v", term(addr, 100), err)
	}
	if remote || loopback(host) {
		return nil
	}
	return fmt.Errorf("--addr %s is not a loopback address: every page, payloads included, would be served without authentication to whoever reaches it; "+
		"serve on 127.0.0.1 and reach it through SSH, or add --allow-remote if the network is yours", term(addr, 100))
}

// loopback reports whether host names only this machine: localhost or a loopback IP.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serve serves the read-only UI until ctx ends.
func serve(ctx context.Context, src sluiceui.Source, o options, stdout io.Writer) (int, error) {
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return exitFinding, fmt.Errorf("--addr %s: %w", term(o.addr, 100), err)
	}
	// The pages are read-only and shown to whoever connects: checkAddr kept that to this
	// machine unless --allow-remote.
	ui := sluiceui.New(src, sluiceui.Options{ReadOnly: true, PublicRead: true})
	srv := &http.Server{Handler: ui, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10}
	if host, _, _ := net.SplitHostPort(o.addr); !loopback(host) {
		fmt.Fprintf(stdout, "warning: %s is reachable from other hosts: every job, payloads included, is shown to whoever connects, without authentication\n", ln.Addr())
	}
	fmt.Fprintf(stdout, "serving %s read-only on http://%s/ (interrupt to stop)\n", term(o.dir, 200), ln.Addr())
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

type scheduleOut struct {
	Name       string     `json:"name"`
	Spec       string     `json:"spec"`
	Kind       string     `json:"kind"`
	Target     string     `json:"target"`
	Key        string     `json:"key,omitempty"`
	Group      string     `json:"sequence,omitempty"`
	Next       *time.Time `json:"next,omitempty"`
	Last       *time.Time `json:"last,omitempty"`
	LastJob    uint64     `json:"last_job,omitempty"`
	Fired      uint64     `json:"fired"`
	SkipMissed bool       `json:"skip_missed"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// schedules lists the periodic jobs' schedules, by name.
func schedules(ctx context.Context, src sluiceui.Source, o options, stdout io.Writer) (int, error) {
	scheds, err := src.Schedules(ctx)
	if err != nil {
		return exitFinding, err
	}
	if o.json {
		out := make([]scheduleOut, len(scheds))
		for i, s := range scheds {
			out[i] = scheduleOut{Name: s.Name, Spec: s.Spec, Kind: s.Kind, Target: s.Target, Key: s.Key, Group: s.Group, Next: timePtr(s.Next),
				Last: timePtr(s.Last), LastJob: s.LastJob, Fired: s.Fired, SkipMissed: s.SkipMissed}
		}
		return exitOK, writeJSON(stdout, out)
	}
	if len(scheds) == 0 {
		fmt.Fprintln(stdout, "no schedule (a program sets them with Kind.Schedule)")
		return exitOK, nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSPEC\tKIND\tTARGET\tNEXT DUE\tLAST PERIOD\tLAST JOB\tFIRED")
	for _, s := range scheds {
		next := when(s.Next)
		if s.Next.IsZero() {
			next = "none"
		}
		last := "-"
		if s.LastJob != 0 {
			last = fmt.Sprint(s.LastJob)
		}
		kind := term(s.Kind, 30)
		if s.Key != "" {
			kind += " key " + term(s.Key, 30)
		}
		if s.Group != "" {
			kind += " sequence " + term(s.Group, 30)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", term(s.Name, 40), term(s.Spec, 40), kind,
			term(s.Target, 40), next, when(s.Last), last, s.Fired)
	}
	return exitOK, tw.Flush()
}
