package langchaingo_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/matryer/is"
	"github.com/statesidecar/state/adapters/langchaingo"
	"github.com/statesidecar/state/internal/storetest"
	"github.com/tmc/langchaingo/llms"
)

func TestMessagesRoundTripEveryType(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		h, err := langchaingo.NewChatMessageHistory(storetest.Open(t, b.URL, nil), "conv/1", nil)
		is.NoErr(err)
		msgs, err := h.Messages(ctx)
		is.NoErr(err)
		is.Equal(len(msgs), 0) // a new conversation is empty
		want := []llms.ChatMessage{
			llms.SystemChatMessage{Content: "be brief"},
			llms.HumanChatMessage{Content: "weather in Paris?"},
			llms.AIChatMessage{ToolCalls: []llms.ToolCall{{ID: "c1", Type: "function",
				FunctionCall: &llms.FunctionCall{Name: "weather", Arguments: `{"city":"Paris"}`}}}},
			llms.ToolChatMessage{ID: "c1", Content: "18°C"},
			llms.FunctionChatMessage{Name: "weather", Content: "18°C"},
			llms.GenericChatMessage{Role: "critic", Content: "fine", Name: "bob"},
			llms.AIChatMessage{Content: "18°C and sunny"},
		}
		for _, m := range want {
			is.NoErr(h.AddMessage(ctx, m))
		}
		is.NoErr(h.AddUserMessage(ctx, "thanks"))
		is.NoErr(h.AddAIMessage(ctx, "you're welcome"))
		want = append(want, llms.HumanChatMessage{Content: "thanks"}, llms.AIChatMessage{Content: "you're welcome"})
		got, err := h.Messages(ctx)
		is.NoErr(err)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("every message type must come back whole, in order (-want +got):\n%s", diff)
		}

		other, _ := langchaingo.NewChatMessageHistory(storetest.Open(t, b.URL, nil), "conv/1", nil)
		got, err = other.Messages(ctx)
		is.NoErr(err)
		is.Equal(len(got), len(want)) // another handle (another process) sees the same conversation
		iso, _ := langchaingo.NewChatMessageHistory(storetest.Open(t, b.URL, nil), "conv", nil)
		got, _ = iso.Messages(ctx)
		is.Equal(len(got), 0) // conversations are separate, even when one id is a prefix of another

		is.NoErr(h.SetMessages(ctx, []llms.ChatMessage{llms.HumanChatMessage{Content: "summary"}}))
		got, _ = other.Messages(ctx)
		is.Equal(got, []llms.ChatMessage{llms.HumanChatMessage{Content: "summary"}}) // SetMessages replaces
		is.NoErr(h.AddAIMessage(ctx, "after"))
		got, _ = h.Messages(ctx)
		is.Equal(len(got), 2) // and appends continue after the replacement
		is.NoErr(h.Clear(ctx))
		got, _ = h.Messages(ctx)
		is.Equal(len(got), 0) // Clear empties it
		is.NoErr(h.AddUserMessage(ctx, "again"))
		got, _ = h.Messages(ctx)
		is.Equal(got, []llms.ChatMessage{llms.HumanChatMessage{Content: "again"}})
	})
}

func TestSetMessagesReplacesLongConversationsAndCleansUp(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		st := storetest.Open(t, b.URL, nil)
		h, _ := langchaingo.NewChatMessageHistory(st, "long", nil)
		many := make([]llms.ChatMessage, 250) // several batches
		for i := range many {
			many[i] = llms.HumanChatMessage{Content: fmt.Sprint(i)}
		}
		is.NoErr(h.SetMessages(ctx, many))
		is.NoErr(h.SetMessages(ctx, many[:3]))
		got, err := h.Messages(ctx)
		is.NoErr(err)
		is.Equal(got, many[:3])
		keys, err := st.List(ctx, langchaingo.DefaultPrefix)
		is.NoErr(err)
		is.Equal(len(keys.Keys), 4) // the head and three messages: the replaced ones were deleted
	})
}

// Appends racing from several handles (as from several replicas) all land,
// each writer's in its own order, and the histories really overlapped.
func TestConcurrentAppendsStayOrdered(t *testing.T) {
	storetest.Run(t, func(t *testing.T, b storetest.Backend) {
		is := is.New(t)
		ctx := t.Context()
		const writers, each = 6, 8
		hs := make([]*langchaingo.ChatMessageHistory, writers)
		for w := range hs {
			hs[w], _ = langchaingo.NewChatMessageHistory(storetest.Open(t, b.URL, nil), "busy", nil)
		}
		start := make(chan struct{})
		var wg, midway sync.WaitGroup
		midway.Add(writers)
		for w := range writers {
			wg.Go(func() {
				<-start
				for i := range each {
					if i == 1 { // every writer has appended once before any goes on
						midway.Done()
						midway.Wait()
					}
					if err := hs[w].AddUserMessage(ctx, fmt.Sprintf("w%d-%d", w, i)); err != nil {
						t.Errorf("append: %v", err)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		got, err := hs[0].Messages(ctx)
		is.NoErr(err)
		is.Equal(len(got), writers*each) // no append was lost
		next := make([]int, writers)
		last := -1
		switches := 0
		for _, m := range got {
			var w, i int
			_, err := fmt.Sscanf(m.GetContent(), "w%d-%d", &w, &i)
			is.NoErr(err)
			if i != next[w] {
				t.Fatalf("writer %d's message %d came where %d was due: %s", w, i, next[w], strings.Join(contents(got), " "))
			}
			next[w]++
			if w != last {
				switches++
				last = w
			}
		}
		is.True(switches > writers) // the writers' appends interleaved: they raced
	})
}

func contents(ms []llms.ChatMessage) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.GetContent()
	}
	return out
}

type custom struct{ text string }

func (c custom) GetType() llms.ChatMessageType { return "critic" }
func (c custom) GetContent() string            { return c.text }

func TestOtherMessageTypesAndBadInput(t *testing.T) {
	is := is.New(t)
	ctx := t.Context()
	st := storetest.Open(t, storetest.New(t, "memory").URL, nil)
	_, err := langchaingo.NewChatMessageHistory(st, "", nil)
	is.True(err != nil) // a conversation needs an id
	h, _ := langchaingo.NewChatMessageHistory(st, "c", nil)
	is.NoErr(h.AddMessage(ctx, custom{"hm"}))
	got, _ := h.Messages(ctx)
	is.Equal(got, []llms.ChatMessage{llms.GenericChatMessage{Role: "critic", Content: "hm"}}) // kept as a generic message with its type as role
	is.True(h.AddMessage(ctx, nil) != nil)                                                    // a nil message is refused
	is.True(h.AddUserMessage(ctx, strings.Repeat("x", 2<<20)) != nil)                         // so is one over the store's value limit
	got, _ = h.Messages(ctx)
	is.Equal(len(got), 1) // and neither was stored
}
