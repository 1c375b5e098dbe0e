package sluiceui

import (
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"sync"
	"time"
)

// Confirmation tokens: each confirmation page issues a fresh random token for one action on
// one subject (a job, or a kind for pause and resume); a POST redeems it once, within tokenTTL. At most tokensMax wait at once: issuing
// one more drops the oldest, so a visitor reloading a confirmation page cannot grow memory.
const (
	tokenTTL  = 10 * time.Minute
	tokensMax = 1024
)

type tokenFor struct {
	action  Action
	subject string // jobSubject or kindSubject
	expiry  time.Time
}

type tokens struct {
	mu     sync.Mutex
	issued map[string]tokenFor
	order  []string // issue order, for dropping the oldest
}

// issue returns a new token for a on subject, valid until now+tokenTTL.
func (t *tokens) issue(a Action, subject string, now time.Time) string {
	var b [18]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	t.mu.Lock()
	defer t.mu.Unlock()
	for len(t.order) > 0 && (len(t.order) >= tokensMax || t.expired(t.order[0], now)) {
		delete(t.issued, t.order[0])
		t.order = t.order[1:]
	}
	t.issued[tok] = tokenFor{action: a, subject: subject, expiry: now.Add(tokenTTL)}
	t.order = append(t.order, tok)
	return tok
}

// expired reports whether tok is gone (redeemed) or past its expiry.
func (t *tokens) expired(tok string, now time.Time) bool {
	f, ok := t.issued[tok]
	return !ok || !now.Before(f.expiry)
}

// redeem reports whether tok was issued for a on subject and is unexpired; either way a token
// presented is spent.
func (t *tokens) redeem(tok string, a Action, subject string, now time.Time) bool {
	if tok == "" {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f, ok := t.issued[tok]
	delete(t.issued, tok)
	return ok && f.action == a && f.subject == subject && now.Before(f.expiry)
}

// jobSubject and kindSubject name what a token is for; the prefixes keep a job's token from
// passing for a kind's.
func jobSubject(id uint64) string    { return "job " + strconv.FormatUint(id, 10) }
func kindSubject(kind string) string { return "kind " + kind }
