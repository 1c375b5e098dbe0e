package sluiceui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/sluicehq/sluice"
)

// kindsData is the kinds page's: every kind a job names or the journal pauses, with its
// counts, whether it is paused, and the action the visitor may take on it.
type kindsData struct {
	Kinds   []kindRow
	Partial bool // the census stopped before the last job
}

type kindRow struct {
	Kind             string
	Waiting, Running int
	Paused           bool
	Action           Action // pause, resume, or "" when the visitor may not act
	// Named: the kind is at most NameMax bytes, as every journaled kind is, so links may
	// carry it whole (a source that breaks the rule gets its text shown cut).
	Named bool
	Query string // the kind query-escaped: an attribute never holds a raw control byte
}

func (h *handler) kinds(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	c, _, err := h.censusAt(r.Context(), p.Now)
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	paused, err := h.src.Paused(r.Context())
	if err != nil {
		return "", http.StatusInternalServerError, err
	}
	var d kindsData
	d.Partial = c.Partial
	names := make([]string, 0, len(c.Kinds)+len(paused))
	counts := map[string]*kindCensus{}
	for i := range c.Kinds {
		names = append(names, c.Kinds[i].Kind)
		counts[c.Kinds[i].Kind] = &c.Kinds[i]
	}
	names = append(names, paused...)
	slices.Sort(names)
	for _, k := range slices.Compact(names) {
		row := kindRow{Kind: k, Paused: slices.Contains(paused, k), Named: len(k) <= sluice.NameMax, Query: url.QueryEscape(k)}
		if kc := counts[k]; kc != nil {
			row.Waiting = kc.States[sluice.StatePending] + kc.States[sluice.StateWaiting] + kc.States[sluice.StateDeferred]
			row.Running = kc.States[sluice.StateRunning]
		}
		a := ActionPause
		if row.Paused {
			a = ActionResume
		}
		if row.Named && h.may(r, a) {
			row.Action = a
		}
		d.Kinds = append(d.Kinds, row)
	}
	p.Title, p.Nav, p.Data = "Kinds", "kinds", d
	return "kinds", http.StatusOK, nil
}

// kindActionOf is the kind action a request names and the kind it names: the path's action
// and the query's kind (a POST carries it in its URL too, not in a form field, whose value
// would hold the raw name and which a browser would re-encode).
func kindActionOf(r *http.Request) (Action, string, int, error) {
	a := Action(r.PathValue("action"))
	if a != ActionPause && a != ActionResume {
		return "", "", http.StatusNotFound, fmt.Errorf("sluice: kind action %s: want pause or resume", quote(string(a)))
	}
	kind := r.URL.Query().Get("kind")
	if len(kind) > sluice.NameMax {
		return "", "", http.StatusBadRequest, fmt.Errorf("sluice: kind of %d bytes: a name has at most %d", len(kind), sluice.NameMax)
	}
	return a, kind, http.StatusOK, nil
}

// kindConfirmData is a kind action's confirmation page's.
type kindConfirmData struct {
	Kind   string
	Action Action
	Token  string
}

func (h *handler) confirmKind(_ http.ResponseWriter, r *http.Request, p *page) (string, int, error) {
	a, kind, code, err := kindActionOf(r)
	if err != nil {
		return "", code, err
	}
	if code, err := h.permitted(r, a); err != nil {
		return "", code, err
	}
	p.Title, p.Nav = fmt.Sprintf("%s kind %s?", title(string(a)), quote(kind)), "kinds"
	p.Data = kindConfirmData{Kind: kind, Action: a, Token: h.tokens.issue(a, kindSubject(kind), p.Now)}
	return "confirmkind", http.StatusOK, nil
}

// actKind performs a confirmed pause or resume, under the same checks as a job's action:
// the same-origin check (New's wrapper), Authorize, and the confirmation page's token.
func (h *handler) actKind(w http.ResponseWriter, r *http.Request) {
	a, kind, code, err := kindActionOf(r)
	if err != nil {
		h.fail(w, r, code, err)
		return
	}
	log := h.opts.Logger.With("action", string(a), "kind", kind, "remote", r.RemoteAddr)
	code, err = h.performKind(r, a, kind)
	if err != nil {
		log.Warn("sluiceui: action refused", "err", err)
		h.fail(w, r, code, err)
		return
	}
	log.Info("sluiceui: action done")
	w.Header().Set("Location", "../kinds?done="+url.QueryEscape(string(a)))
	w.WriteHeader(http.StatusSeeOther)
}

func (h *handler) performKind(r *http.Request, a Action, kind string) (int, error) {
	if code, err := h.confirmed(r, a, kindSubject(kind), "the kinds page"); err != nil {
		return code, err
	}
	var err error
	if a == ActionPause {
		err = h.src.Pause(r.Context(), kind)
	} else {
		err = h.src.Resume(r.Context(), kind)
	}
	switch {
	case err == nil:
		return http.StatusOK, nil
	case errors.Is(err, sluice.ErrUnknownKind):
		return http.StatusNotFound, err
	}
	return http.StatusInternalServerError, err
}

// title is s with its first letter upper-cased (ASCII).
func title(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}
