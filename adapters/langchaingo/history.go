// Package langchaingo backs LangChainGo's chat memory with a state.Store:
// ChatMessageHistory implements schema.ChatMessageHistory, so that a
// conversation is durable and shared by every process that opens the same
// store, and appends stay in one order under concurrent writers.
//
//	st, _ := state.Open(ctx, "sqlite:///var/lib/agent/state.db")
//	h, _ := langchaingo.NewChatMessageHistory(st, "conversation-42", nil)
//	mem := memory.NewConversationBuffer(memory.WithChatHistory(h))
//
// # Layout
//
// Under a prefix (default "langchaingo/chat/") and the path-escaped
// conversation id:
//
//	<prefix><id>/head                 the current generation and message count
//	<prefix><id>/m/<generation>/<n>   message n (20 digits) of a generation
//
// Each append is one atomic Store.Update of the head and the new message,
// so racing appenders get consecutive numbers and nothing is lost.
// SetMessages writes a new generation and then switches the head to it in
// one write; Clear removes the head. Either way the old generation's
// messages become invisible at once and are deleted afterwards.
package langchaingo

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/statesidecar/state"
	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/schema"
)

// DefaultPrefix starts every key a ChatMessageHistory writes.
const DefaultPrefix = "langchaingo/chat/"

// Options configure a ChatMessageHistory. A nil *Options means all
// defaults.
type Options struct {
	// Prefix starts every key. Defaults to DefaultPrefix.
	Prefix string
	// AgentID is recorded as the writer, for the store's history.
	AgentID string
}

// ChatMessageHistory is the history of one conversation in a state.Store.
// It is safe for concurrent use, and several processes may share it.
type ChatMessageHistory struct {
	st    *state.Store
	base  string // <prefix><escaped id>/
	agent string
}

var _ schema.ChatMessageHistory = (*ChatMessageHistory)(nil)

// NewChatMessageHistory returns the history of conversation id in st; opts
// may be nil. id must not be empty.
func NewChatMessageHistory(st *state.Store, id string, opts *Options) (*ChatMessageHistory, error) {
	if id == "" {
		return nil, fmt.Errorf("langchaingo: conversation id must not be empty")
	}
	prefix, agent := DefaultPrefix, ""
	if opts != nil {
		if opts.Prefix != "" {
			prefix = opts.Prefix
		}
		agent = opts.AgentID
	}
	return &ChatMessageHistory{st: st, base: prefix + url.PathEscape(id) + "/", agent: agent}, nil
}

// head is the value of a conversation's head entry.
type head struct {
	// Gen names the generation of messages the conversation shows.
	Gen string `json:"gen"`
	// N is the number of messages of the generation.
	N int64 `json:"n"`
}

func (h *ChatMessageHistory) headKey() string { return h.base + "head" }

func (h *ChatMessageHistory) genPrefix(gen string) string { return h.base + "m/" + gen + "/" }

func (h *ChatMessageHistory) msgKey(gen string, n int64) string {
	return fmt.Sprintf("%s%020d", h.genPrefix(gen), n)
}

func newGen() string { return time.Now().UTC().Format("20060102T150405") + "-" + rand.Text()[:8] }

// AddMessage appends message to the conversation.
func (h *ChatMessageHistory) AddMessage(ctx context.Context, message llms.ChatMessage) error {
	val, err := encode(message)
	if err != nil {
		return fmt.Errorf("langchaingo: add message: %w", err)
	}
	gen := newGen()
	_, err = h.st.Update(ctx, []string{h.headKey()}, func(cur []state.Entry) ([]state.Write, error) {
		hd := head{Gen: gen}
		if cur[0].Found() {
			if err := cur[0].Decode(&hd); err != nil {
				return nil, fmt.Errorf("decoding the head: %w", err)
			}
		}
		hd.N++
		return []state.Write{
			{Key: h.headKey(), Value: hd, AgentID: h.agent},
			{Key: h.msgKey(hd.Gen, hd.N), Value: val, AgentID: h.agent},
		}, nil
	})
	if err != nil {
		return fmt.Errorf("langchaingo: add message: %w", err)
	}
	return nil
}

// AddUserMessage appends a human message.
func (h *ChatMessageHistory) AddUserMessage(ctx context.Context, text string) error {
	return h.AddMessage(ctx, llms.HumanChatMessage{Content: text})
}

// AddAIMessage appends an AI message.
func (h *ChatMessageHistory) AddAIMessage(ctx context.Context, text string) error {
	return h.AddMessage(ctx, llms.AIChatMessage{Content: text})
}

// batch is how many messages one read or write handles.
const batch = 100

// Messages returns the conversation's messages in the order they were
// appended.
func (h *ChatMessageHistory) Messages(ctx context.Context) ([]llms.ChatMessage, error) {
	// A conversation replaced or cleared while it is read loses the
	// messages being read: read again, a few times.
	for range 3 {
		msgs, err := h.messages(ctx)
		if err != errReplaced {
			return msgs, err
		}
	}
	return nil, fmt.Errorf("langchaingo: messages: the conversation kept being replaced while it was read")
}

var errReplaced = errors.New("replaced while read")

func (h *ChatMessageHistory) messages(ctx context.Context) ([]llms.ChatMessage, error) {
	es, err := h.st.GetMany(ctx, []string{h.headKey()})
	if err != nil {
		return nil, fmt.Errorf("langchaingo: messages: %w", err)
	}
	if !es[0].Found() {
		return []llms.ChatMessage{}, nil
	}
	var hd head
	if err := es[0].Decode(&hd); err != nil {
		return nil, fmt.Errorf("langchaingo: messages: decoding the head: %w", err)
	}
	out := make([]llms.ChatMessage, 0, hd.N)
	for lo := int64(1); lo <= hd.N; lo += batch {
		keys := make([]string, 0, batch)
		for n := lo; n <= min(lo+batch-1, hd.N); n++ {
			keys = append(keys, h.msgKey(hd.Gen, n))
		}
		ms, err := h.st.GetMany(ctx, keys)
		if err != nil {
			return nil, fmt.Errorf("langchaingo: messages: %w", err)
		}
		for _, m := range ms {
			if !m.Found() {
				return nil, errReplaced
			}
			msg, err := decode(m.Value)
			if err != nil {
				return nil, fmt.Errorf("langchaingo: messages: %s: %w", m.Key, err)
			}
			out = append(out, msg)
		}
	}
	return out, nil
}

// SetMessages replaces the conversation with messages, atomically: readers
// see the old messages or the new ones, never a mix.
func (h *ChatMessageHistory) SetMessages(ctx context.Context, messages []llms.ChatMessage) error {
	vals := make([]json.RawMessage, len(messages))
	for i, m := range messages {
		v, err := encode(m)
		if err != nil {
			return fmt.Errorf("langchaingo: set messages: message %d: %w", i, err)
		}
		vals[i] = v
	}
	gen := newGen()
	// The new generation's messages first: invisible until the head points
	// at them.
	for lo := 0; lo < len(vals); lo += batch {
		var ws []state.Item
		for i := lo; i < min(lo+batch, len(vals)); i++ {
			ws = append(ws, state.Item{Key: h.msgKey(gen, int64(i+1)), Value: vals[i]})
		}
		if _, err := h.st.SetMany(ctx, ws, state.WithAgent(h.agent)); err != nil {
			return fmt.Errorf("langchaingo: set messages: %w", err)
		}
	}
	return h.switchHead(ctx, &head{Gen: gen, N: int64(len(vals))})
}

// Clear removes every message of the conversation.
func (h *ChatMessageHistory) Clear(ctx context.Context) error {
	return h.switchHead(ctx, nil)
}

// switchHead points the conversation at a new generation (nil: none) and
// deletes the messages of the old one.
func (h *ChatMessageHistory) switchHead(ctx context.Context, to *head) error {
	old := ""
	_, err := h.st.Update(ctx, []string{h.headKey()}, func(cur []state.Entry) ([]state.Write, error) {
		old = ""
		if cur[0].Found() {
			var hd head
			if err := cur[0].Decode(&hd); err != nil {
				return nil, fmt.Errorf("decoding the head: %w", err)
			}
			old = hd.Gen
		}
		if to == nil {
			return []state.Write{{Key: h.headKey(), Delete: true, AgentID: h.agent}}, nil
		}
		return []state.Write{{Key: h.headKey(), Value: to, AgentID: h.agent}}, nil
	})
	if err != nil {
		return fmt.Errorf("langchaingo: replacing the conversation: %w", err)
	}
	if old == "" {
		return nil
	}
	if err := h.deleteGen(ctx, old); err != nil {
		return fmt.Errorf("langchaingo: deleting the replaced messages: %w", err)
	}
	return nil
}

// deleteGen deletes the messages of a generation no head points at.
func (h *ChatMessageHistory) deleteGen(ctx context.Context, gen string) error {
	for {
		page, err := h.st.List(ctx, h.genPrefix(gen), state.WithLimit(batch))
		if err != nil {
			return err
		}
		if len(page.Keys) == 0 {
			return nil
		}
		_, err = h.st.Update(ctx, page.Keys, func(cur []state.Entry) ([]state.Write, error) {
			ws := make([]state.Write, len(cur))
			for i, e := range cur {
				ws[i] = state.Write{Key: e.Key, Delete: true, AgentID: h.agent}
			}
			return ws, nil
		})
		if err != nil {
			return err
		}
	}
}
