package state_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/statetest"
)

// everyOption holds one instance of each per-call option, by the field name
// its *FieldError carries.
var everyOption = map[string]state.Option{
	"ttl":        state.WithTTL(time.Minute),
	"agent_id":   state.WithAgent("A"),
	"if_version": state.IfVersion(0),
	"claim_ttl":  state.WithClaimTTL(time.Minute),
	"fence":      state.WithFence(1),
	"status":     state.WithStatus(state.StatusDone),
	"limit":      state.WithLimit(5),
	"cursor":     state.WithCursor(""),
}

// TestOptionsAMethodDoesNotHonourAreErrors calls every method that takes
// options with every option: an option the method does not honour is an
// error naming it, and changes nothing; one it honours is never refused
// for being there.
func TestOptionsAMethodDoesNotHonourAreErrors(t *testing.T) {
	ctx := context.Background()
	methods := []struct {
		name    string
		honours []string
		call    func(st *state.Store, run string, opts ...state.Option) error
	}{
		{"Set", []string{"ttl", "agent_id", "if_version"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.Set(ctx, "fresh", 1, o...)
			return err
		}},
		{"Delete", []string{"agent_id", "if_version"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.Delete(ctx, "k", o...)
			return err
		}},
		{"List", []string{"limit", "cursor"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.List(ctx, "", o...)
			return err
		}},
		{"SetMany", []string{"ttl", "agent_id"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.SetMany(ctx, []state.Item{{Key: "fresh", Value: 1}}, o...)
			return err
		}},
		{"SaveSession", []string{"ttl", "agent_id", "if_version"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.SaveSession(ctx, "fresh", map[string]int{}, o...)
			return err
		}},
		{"DeleteSession", []string{"agent_id", "if_version"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.DeleteSession(ctx, "s", o...)
			return err
		}},
		{"CreateRun", []string{"agent_id"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.CreateRun(ctx, "job", nil, o...)
			return err
		}},
		{"ListRuns", []string{"limit", "cursor"}, func(st *state.Store, _ string, o ...state.Option) error {
			_, err := st.ListRuns(ctx, o...)
			return err
		}},
		{"ClaimRun", []string{"claim_ttl"}, func(st *state.Store, run string, o ...state.Option) error {
			_, err := st.ClaimRun(ctx, run, "A", o...)
			return err
		}},
		{"Checkpoint", []string{"agent_id", "fence", "status"}, func(st *state.Store, run string, o ...state.Option) error {
			_, err := st.Checkpoint(ctx, run, 1, "x", o...)
			return err
		}},
		{"CompleteRun", []string{"agent_id", "fence"}, func(st *state.Store, run string, o ...state.Option) error {
			_, err := st.CompleteRun(ctx, run, o...)
			return err
		}},
		{"FailRun", []string{"agent_id", "fence"}, func(st *state.Store, run string, o ...state.Option) error {
			_, err := st.FailRun(ctx, run, o...)
			return err
		}},
	}
	for _, m := range methods {
		t.Run(m.name, func(t *testing.T) {
			for field, opt := range everyOption {
				st, _ := statetest.NewStore(t)
				_, _ = st.Set(ctx, "k", 1)
				_, _ = st.SaveSession(ctx, "s", map[string]int{})
				run, err := st.CreateRun(ctx, "job", nil)
				if err != nil {
					t.Fatal(err)
				}
				c, err := st.ClaimRun(ctx, run.ID, "A")
				if err != nil {
					t.Fatal(err)
				}
				before, _ := st.Health(ctx)
				honoured := false
				for _, h := range m.honours {
					honoured = honoured || h == field
				}
				if field == "fence" {
					opt = state.WithFence(c.Fence)
				}
				err = m.call(st, run.ID, opt)
				var fe *state.FieldError
				refused := errors.As(err, &fe) && fe.Field == field && strings.Contains(fe.Problem, "is not an option of "+m.name)
				switch {
				case honoured && refused:
					t.Errorf("%s refused %s, which it honours: %v", m.name, field, err)
				case !honoured && !refused:
					t.Errorf("%s must refuse the option %s it does not honour, with a *FieldError naming it; got %v", m.name, field, err)
				case !honoured:
					if !errors.Is(err, state.ErrInvalid) {
						t.Errorf("%s: an unhonoured option must match ErrInvalid: %v", m.name, err)
					}
					after, _ := st.Health(ctx)
					if after.Events != before.Events {
						t.Errorf("%s with the unhonoured option %s wrote something (%d events, before %d)", m.name, field, after.Events, before.Events)
					}
				}
			}
		})
	}
}

func TestUnhonouredOptionErrorNamesTheOptionAndWhatIsHonoured(t *testing.T) {
	st, _ := statetest.NewStore(t)
	_, err := st.Set(context.Background(), "k", "v", state.WithFence(7))
	if err == nil {
		t.Fatal("Set with WithFence must fail")
	}
	want := `state: kv.set "k": fence (WithFence) is not an option of Set, which honours WithTTL, WithAgent, IfVersion`
	if err.Error() != want {
		t.Errorf("got  %q\nwant %q", err.Error(), want)
	}
	_, err = st.Set(context.Background(), "k", "v", nil, state.WithAgent("A"))
	if err != nil {
		t.Errorf("nil options are skipped: %v", err)
	}
}
