package sidecar

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/statesidecar/state/mcpadapter"
	"golang.org/x/time/rate"
)

// The admission layer (issue 20): every POST to /mcp is decoded once, after
// authentication and after its body has arrived, into what the other layers
// decide on (its method, its tool, whether it is a long-poll, an
// initialize), and is admitted against its tenant's share: requests in
// flight, parked long-polls, stateful sessions and a request rate. A tenant
// is a token's namespace, or, on a sidecar without tokens, the client's IP
// address. A tenant at a limit gets 429 with Retry-After and a JSON-RPC
// error; the others are served as before.

// A requestKind is what a request is, for admission.
type requestKind uint8

const (
	kindOther      requestKind = iota
	kindLongPoll               // waits: state_wait, workflow_wait, tasks/result, subscriptions/listen
	kindInitialize             // starts a session on a stateful server
)

// A decoded request is what admission and the layers after it know of a
// message: decoded once, as mcp-go decodes it (encoding/json: escapes
// undone, keys matched without regard to case, the last of duplicate keys
// winning), so that no spelling of a name makes the layers see another
// request than mcp-go serves.
type decoded struct {
	kind   requestKind
	method string
	tool   string
	id     json.RawMessage // the JSON-RPC id, for an error reply; nil if none
	batch  bool
}

// decodeRequest decodes msg, a JSON-RPC message or batch. A batch is a
// long-poll if any of its messages is (mcp-go refuses batches today; if it
// ever serves them, they are counted as what they may do), and an
// initialize if any is.
func decodeRequest(msg []byte) decoded {
	msg = bytes.TrimLeft(msg, " \t\r\n")
	if len(msg) > 0 && msg[0] == '[' {
		var items []json.RawMessage
		d := decoded{batch: true}
		if json.Unmarshal(msg, &items) != nil {
			return d
		}
		for _, it := range items {
			switch decodeOne(it).kind {
			case kindLongPoll:
				d.kind = kindLongPoll
			case kindInitialize:
				if d.kind == kindOther {
					d.kind = kindInitialize
				}
			}
		}
		return d
	}
	return decodeOne(msg)
}

// decodeOne decodes a single JSON-RPC message.
func decodeOne(msg []byte) decoded {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	// A type error (a params that is not an object, a name that is not a
	// string) leaves the fields that did decode; mcp-go then refuses a
	// tools/call, so its tool is not believed.
	err := json.Unmarshal(msg, &m)
	var typeErr *json.UnmarshalTypeError
	if err != nil && !errors.As(err, &typeErr) {
		return decoded{}
	}
	d := decoded{method: m.Method, id: m.ID}
	switch m.Method {
	case "tools/call":
		if err != nil {
			return d
		}
		d.tool = m.Params.Name
		if _, ok := mcpadapter.LongPollTimeout(d.tool, nil); ok {
			d.kind = kindLongPoll
		}
	case "tasks/result", "subscriptions/listen":
		d.kind = kindLongPoll // waits for a task to finish, or streams (tasks.go)
	case "initialize":
		d.kind = kindInitialize
	}
	return d
}

// decodedKey holds, in a request's context, its decoded message.
type decodedKey struct{}

// requestOf returns the decoded message of a POST that readBody read.
func requestOf(ctx context.Context) (decoded, bool) {
	d, ok := ctx.Value(decodedKey{}).(decoded)
	return d, ok
}

// isLongPollRequest reports whether r is a long-poll, as decoded.
func isLongPollRequest(r *http.Request) bool {
	d, ok := requestOf(r.Context())
	return ok && d.kind == kindLongPoll
}

// FairConfig is the per-tenant fair share of an HTTP sidecar. A tenant is a
// bearer token's namespace, or the client's IP address on a sidecar without
// tokens. Zero turns a per-tenant limit off.
type FairConfig struct {
	// MaxConcurrentRequests caps a tenant's requests being served at once
	// (long-polls apart).
	MaxConcurrentRequests int
	// MaxLongPolls caps a tenant's parked long-polls (state_wait,
	// workflow_wait, tasks/result, subscriptions/listen).
	MaxLongPolls int
	// MaxSessions caps a tenant's live sessions of a stateful server.
	MaxSessions int
	// Rate is a tenant's sustained requests per second; Burst how many it
	// may send at once above it. Rate 0 means no rate limit.
	Rate  float64
	Burst int
	// MaxUnauthenticatedConnections caps, on a sidecar with tokens, the
	// connections that have not yet made an authenticated request; beyond
	// it the oldest idle one is closed.
	MaxUnauthenticatedConnections int
	// UnauthenticatedIdleTimeout bounds how long such a connection may stay
	// idle, or take to send its first request's headers.
	UnauthenticatedIdleTimeout time.Duration
}

// DefaultFairConfig is the fair share when no setting says otherwise.
func DefaultFairConfig() FairConfig {
	return FairConfig{
		MaxConcurrentRequests:         64,
		MaxLongPolls:                  128,
		MaxSessions:                   100,
		Rate:                          0,
		Burst:                         0,
		MaxUnauthenticatedConnections: 64,
		UnauthenticatedIdleTimeout:    5 * time.Second,
	}
}

// The fair-share settings follow the other HTTP limits in -h.
func init() {
	settings = append(settings,
		setting{env: "SIDECAR_TENANT_MAX_CONCURRENT_REQUESTS", flag: "tenant-max-concurrent-requests", only: TransportHTTP,
			usage: "most /mcp requests of one tenant (token namespace; client IP without tokens) served at once; one more gets 429 (0: no per-tenant limit)",
			show:  func(c *Config) string { return strconv.Itoa(c.Fair.MaxConcurrentRequests) },
			set:   func(c *Config, v string) error { return parseLimit(&c.Fair.MaxConcurrentRequests, v) }},
		setting{env: "SIDECAR_TENANT_MAX_LONG_POLLS", flag: "tenant-max-long-polls", only: TransportHTTP,
			usage: "most parked long-polls (state_wait, workflow_wait, tasks/result) of one tenant; one more gets 429 (0: no limit)",
			show:  func(c *Config) string { return strconv.Itoa(c.Fair.MaxLongPolls) },
			set:   func(c *Config, v string) error { return parseLimit(&c.Fair.MaxLongPolls, v) }},
		setting{env: "SIDECAR_TENANT_MAX_SESSIONS", flag: "tenant-max-sessions", only: onlyStateful,
			usage: "most live sessions of one tenant on a stateful server; one more initialize gets 429 (0: no limit)",
			show:  func(c *Config) string { return strconv.Itoa(c.Fair.MaxSessions) },
			set:   func(c *Config, v string) error { return parseLimit(&c.Fair.MaxSessions, v) }},
		setting{env: "SIDECAR_TENANT_RATE", flag: "tenant-rate", only: TransportHTTP,
			usage: "sustained /mcp requests per second of one tenant; more get 429 (0: no rate limit)",
			show:  func(c *Config) string { return strconv.FormatFloat(c.Fair.Rate, 'f', -1, 64) },
			set: func(c *Config, v string) error {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
					return fmt.Errorf("%q is not a number of requests per second (0 or more)", v)
				}
				c.Fair.Rate = f
				return nil
			}},
		setting{env: "SIDECAR_TENANT_BURST", flag: "tenant-burst", only: TransportHTTP,
			usage: "requests one tenant may send at once above SIDECAR_TENANT_RATE (0: twice the rate, at least 1)",
			show:  func(c *Config) string { return strconv.Itoa(c.Fair.Burst) },
			set:   func(c *Config, v string) error { return parseLimit(&c.Fair.Burst, v) }},
		setting{env: "SIDECAR_MAX_UNAUTHENTICATED_CONNECTIONS", flag: "max-unauthenticated-connections", only: TransportHTTP,
			usage: "with tokens: most open connections not yet authenticated; beyond it the oldest idle one is closed",
			show:  func(c *Config) string { return strconv.Itoa(c.Fair.MaxUnauthenticatedConnections) },
			set:   func(c *Config, v string) error { return parseInt(&c.Fair.MaxUnauthenticatedConnections, v) }},
		setting{env: "SIDECAR_UNAUTHENTICATED_IDLE_TIMEOUT_SECONDS", flag: "unauthenticated-idle-timeout-seconds", only: TransportHTTP,
			usage: "with tokens: how long a connection not yet authenticated may stay idle or take to send its headers",
			show:  func(c *Config) string { return showSeconds(c.Fair.UnauthenticatedIdleTimeout) },
			set:   func(c *Config, v string) error { return parseSeconds(&c.Fair.UnauthenticatedIdleTimeout, v, false) }},
	)
}

// parseLimit reads a count that may be 0 (no limit).
func parseLimit(dst *int, v string) error {
	n, err := parseCount(v, 0, math.MaxInt32)
	if err != nil {
		return err
	}
	*dst = int(n)
	return nil
}

// Limits a refusal names, as the label of MetricAdmissionRefused.
const (
	limitConcurrency = "concurrent_requests"
	limitLongPolls   = "long_polls"
	limitRate        = "rate"
	limitSessions    = "sessions"
)

// MetricAdmissionRefused counts the requests refused by the fair share.
const MetricAdmissionRefused = "state_sidecar_admission_refused_total"

// A tenant is one tenant's counts and rate limiter.
type tenant struct {
	inFlight, longPolls, sessions int
	limiter                       *rate.Limiter
	// refusals lets a tenant have a few refusals answered at once; beyond
	// them, up to maxSlowed at a time are answered after a delay (see
	// slowDown), so that a client that does not back off sends fewer.
	refusals *rate.Limiter
	slowed   int
}

// Refusals beyond refusalBurst at once and refusalRate a second are
// answered after slowDelay, maxSlowed of a tenant at a time.
const (
	refusalRate  = 10
	refusalBurst = 20
	slowDelay    = 500 * time.Millisecond
	maxSlowed    = 128
)

// slowDown reports how long to hold the refusal of a request of tenant key
// before answering it, and the function to call once it is answered.
func (a *admission) slowDown(key string) (time.Duration, func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.get(key)
	if t.refusals == nil {
		t.refusals = rate.NewLimiter(refusalRate, refusalBurst)
	}
	if t.refusals.AllowN(a.now(), 1) || t.slowed >= maxSlowed {
		return 0, func() {}
	}
	t.slowed++
	return slowDelay, func() {
		a.mu.Lock()
		t.slowed--
		a.mu.Unlock()
	}
}

// An admission keeps every tenant's share.
type admission struct {
	cfg     FairConfig
	mu      sync.Mutex
	tenants map[string]*tenant
	refused *prometheus.CounterVec
	now     func() time.Time
}

func newAdmission(cfg FairConfig, reg prometheus.Registerer) *admission {
	a := &admission{cfg: cfg, tenants: map[string]*tenant{}, now: time.Now,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAdmissionRefused,
			Help: "/mcp requests refused with 429 because their tenant was at a limit, by limit."}, []string{"limit"})}
	for _, l := range []string{limitConcurrency, limitLongPolls, limitRate, limitSessions} {
		a.refused.WithLabelValues(l)
	}
	reg.MustRegister(a.refused)
	return a
}

// maxIdleTenants bounds the tenants kept with nothing in flight (their rate
// limiters): beyond it, those whose bucket is full again are forgotten.
const maxIdleTenants = 4096

// get returns key's tenant; a.mu is held.
func (a *admission) get(key string) *tenant {
	t := a.tenants[key]
	if t == nil {
		if len(a.tenants) >= maxIdleTenants {
			a.forgetIdle()
		}
		t = &tenant{}
		if a.cfg.Rate > 0 {
			burst := a.cfg.Burst
			if burst == 0 {
				burst = max(int(2*a.cfg.Rate), 1)
			}
			t.limiter = rate.NewLimiter(rate.Limit(a.cfg.Rate), burst)
		}
		a.tenants[key] = t
	}
	return t
}

// forgetIdle forgets the tenants that hold nothing and whose rate limiter
// is full; a.mu is held.
func (a *admission) forgetIdle() {
	now := a.now()
	for k, t := range a.tenants {
		if t.forgettable(now) {
			delete(a.tenants, k)
		}
	}
}

// forgettable reports whether forgetting t changes nothing: it holds
// nothing, and its limiters are full.
func (t *tenant) forgettable(now time.Time) bool {
	full := func(l *rate.Limiter) bool { return l == nil || l.TokensAt(now) >= float64(l.Burst()) }
	return t.inFlight == 0 && t.longPolls == 0 && t.sessions == 0 && t.slowed == 0 && full(t.limiter) && full(t.refusals)
}

// A refusal says which limit refused a request and when to try again.
type refusal struct {
	limit      string
	retryAfter time.Duration
	message    string
}

// admit admits a request of kind k from tenant key, or says why not. The
// returned release ends the request's share (call it once, when it ends).
func (a *admission) admit(key string, k requestKind) (release func(), ref *refusal) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.get(key)
	switch {
	case k == kindLongPoll && a.cfg.MaxLongPolls > 0 && t.longPolls >= a.cfg.MaxLongPolls:
		ref = &refusal{limitLongPolls, 5 * time.Second,
			fmt.Sprintf("too many long-polls waiting: this tenant may have %d at once", a.cfg.MaxLongPolls)}
	case k != kindLongPoll && a.cfg.MaxConcurrentRequests > 0 && t.inFlight >= a.cfg.MaxConcurrentRequests:
		ref = &refusal{limitConcurrency, time.Second,
			fmt.Sprintf("too many requests in flight: this tenant may have %d at once", a.cfg.MaxConcurrentRequests)}
	case t.limiter != nil:
		now := a.now()
		if r := t.limiter.ReserveN(now, 1); !r.OK() || r.DelayFrom(now) > 0 {
			d := time.Second
			if r.OK() {
				d = r.DelayFrom(now)
				r.CancelAt(now)
			}
			ref = &refusal{limitRate, d,
				fmt.Sprintf("request rate above this tenant's limit of %g per second", a.cfg.Rate)}
		}
	}
	if ref != nil {
		a.refused.WithLabelValues(ref.limit).Inc()
		return nil, ref
	}
	if k == kindLongPoll {
		t.longPolls++
	} else {
		t.inFlight++
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			if k == kindLongPoll {
				t.longPolls--
			} else {
				t.inFlight--
			}
			if t.forgettable(a.now()) {
				delete(a.tenants, key)
			}
		})
	}, nil
}

// precheck refuses, before its body is read, a request of tenant key that
// would be refused whatever it is: the tenant is over its rate, or at both
// its request and its long-poll limits. (A flooding tenant then costs its
// headers, not its bodies.) It takes nothing: admit decides the rest.
func (a *admission) precheck(key string) *refusal {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tenants[key]
	if t == nil {
		return nil
	}
	var ref *refusal
	switch {
	case a.cfg.MaxConcurrentRequests > 0 && t.inFlight >= a.cfg.MaxConcurrentRequests &&
		a.cfg.MaxLongPolls > 0 && t.longPolls >= a.cfg.MaxLongPolls:
		ref = &refusal{limitConcurrency, time.Second,
			fmt.Sprintf("too many requests in flight: this tenant may have %d at once, and %d long-polls",
				a.cfg.MaxConcurrentRequests, a.cfg.MaxLongPolls)}
	case t.limiter != nil:
		now := a.now()
		if tokens := t.limiter.TokensAt(now); tokens < 1 {
			d := time.Duration((1 - tokens) / float64(t.limiter.Limit()) * float64(time.Second))
			ref = &refusal{limitRate, d,
				fmt.Sprintf("request rate above this tenant's limit of %g per second", a.cfg.Rate)}
		}
	}
	if ref != nil {
		a.refused.WithLabelValues(ref.limit).Inc()
	}
	return ref
}

// reserveSession counts a new session of tenant key, or refuses it.
func (a *admission) reserveSession(key string) *refusal {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.get(key)
	if a.cfg.MaxSessions > 0 && t.sessions >= a.cfg.MaxSessions {
		a.refused.WithLabelValues(limitSessions).Inc()
		return &refusal{limitSessions, 0,
			fmt.Sprintf("too many sessions: this tenant may have %d live sessions", a.cfg.MaxSessions)}
	}
	t.sessions++
	return nil
}

// endSession uncounts a session of tenant key.
func (a *admission) endSession(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.tenants[key]; t != nil && t.sessions > 0 {
		t.sessions--
		if t.forgettable(a.now()) {
			delete(a.tenants, key)
		}
	}
}

// tenantOf names the tenant of an authenticated request: its token's
// namespace on a sidecar with tokens, its client's IP address otherwise.
func (s *Sidecar) tenantOf(r *http.Request) string {
	if s.cfg.authenticates() { // static tokens or OAuth
		ns, _ := mcpadapter.NamespaceFrom(r.Context())
		return "ns:" + ns
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// refuse answers a refused request of tenant, as refuse does, after the
// delay slowDown says (the request's context ending cuts it short).
func (s *Sidecar) refuse(w http.ResponseWriter, r *http.Request, tenant string, d decoded, ref *refusal) {
	if delay, done := s.admit.slowDown(tenant); delay > 0 {
		defer done()
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	refuse(w, d, ref)
}

// refuse answers a refused request: 429, Retry-After, and a JSON-RPC error
// with the request's id; the connection is closed after the answer, so that
// a tenant over its limits holds no connection either.
func refuse(w http.ResponseWriter, d decoded, ref *refusal) {
	secs := int(math.Ceil(ref.retryAfter.Seconds()))
	secs = max(secs, 1)
	id := d.id
	if len(id) == 0 || d.batch {
		id = json.RawMessage("null")
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"id":      id,
		"error": map[string]any{
			"code":    codeTooManyRequests,
			"message": ref.message + "; try again later",
			"data":    map[string]any{"limit": ref.limit, "retry_after_seconds": secs},
		},
	})
	h := w.Header()
	h.Set("Retry-After", strconv.Itoa(secs))
	h.Set("Content-Type", "application/json")
	h.Set("Connection", "close")
	w.WriteHeader(http.StatusTooManyRequests)
	_, _ = w.Write(append(body, '\n'))
}

// codeTooManyRequests is the JSON-RPC error code of a refusal: in the
// range JSON-RPC leaves to servers.
const codeTooManyRequests = -32029
