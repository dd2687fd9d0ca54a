package sidecar

import "testing"

// fairLimits are the fair-share limits a test sets; 0 keeps the default.
// (The attack tests go through setFair so that they also build, with no
// fair share, on a main without it: that is how they were seen to fail.)
type fairLimits struct {
	concurrent, longPolls, sessions, unauthConns int
	rate                                         float64
	burst                                        int
}

// setFair sets the fair-share limits of cfg.
func setFair(cfg *Config, l fairLimits) {
	set := func(dst *int, v int) {
		if v != 0 {
			*dst = v
		}
	}
	set(&cfg.Fair.MaxConcurrentRequests, l.concurrent)
	set(&cfg.Fair.MaxLongPolls, l.longPolls)
	set(&cfg.Fair.MaxSessions, l.sessions)
	set(&cfg.Fair.MaxUnauthenticatedConnections, l.unauthConns)
	set(&cfg.Fair.Burst, l.burst)
	if l.rate != 0 {
		cfg.Fair.Rate = l.rate
	}
}

// gatheredCounter reads the counter name{label=value} from the registry.
func gatheredCounter(t *testing.T, m *Metrics, name, value string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, lp := range s.GetLabel() {
				if lp.GetValue() == value {
					return s.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no counter %s{%s}", name, value)
	return 0
}
