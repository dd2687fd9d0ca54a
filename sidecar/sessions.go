package sidecar

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"sync"
)

// sessions is the session id manager of a stateful HTTP server: it keeps
// the ids of live sessions, at most max of them, and forgets an id when its
// session ends (DELETE, or mcp-go's idle sweeper). mcp-go's own stateful
// manager remembers every terminated id for ever, so a flood of initialize
// calls would grow memory without bound.
type sessions struct {
	mu   sync.Mutex
	live map[string]struct{}
	max  int
	// owner names the tenant of each live session that has one (see own);
	// onEnd is told when such a session ends.
	owner map[string]string
	onEnd func(tenant string)
}

func newSessions(max int, onEnd func(tenant string)) *sessions {
	return &sessions{live: map[string]struct{}{}, max: max, owner: map[string]string{}, onEnd: onEnd}
}

// own makes tenant the owner of the live session id, whose start was
// counted against tenant's share; it reports false if id is not live (the
// caller then gives the share back).
func (m *sessions) own(id, tenant string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live[id]; !ok {
		return false
	}
	m.owner[id] = tenant
	return true
}

// errNoSession is what Validate says of an id that is not live; mcp-go
// answers 404, which tells the client to initialize again.
var errNoSession = errors.New("no such session (it ended, or it was idle too long)")

// Generate issues the id of a new session. readBody refuses an initialize
// beforehand while the server is full, so the cap holds give or take the
// initializes that arrive together.
func (m *sessions) Generate() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := "mcp-session-" + hex.EncodeToString(b[:])
	m.mu.Lock()
	m.live[id] = struct{}{}
	m.mu.Unlock()
	return id
}

// Validate reports whether id is a live session.
func (m *sessions) Validate(id string) (isTerminated bool, err error) {
	m.mu.Lock()
	_, ok := m.live[id]
	m.mu.Unlock()
	if !ok {
		return false, errNoSession
	}
	return false, nil
}

// Terminate forgets id.
func (m *sessions) Terminate(id string) (isNotAllowed bool, err error) {
	m.mu.Lock()
	delete(m.live, id)
	tenant, owned := m.owner[id]
	delete(m.owner, id)
	m.mu.Unlock()
	if owned && m.onEnd != nil {
		m.onEnd(tenant)
	}
	return false, nil
}

// full reports whether no more sessions may start.
func (m *sessions) full() bool { return m.count() >= m.max }

// count returns the number of live sessions.
func (m *sessions) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.live)
}
