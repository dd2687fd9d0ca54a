package langchaingo

import (
	"encoding/json"
	"fmt"

	"github.com/tmc/langchaingo/llms"
)

// stored is how a message is kept: its type and the JSON of LangChainGo's
// struct for that type, so that tool calls, names and ids survive.
type stored struct {
	Type llms.ChatMessageType `json:"type"`
	Data json.RawMessage      `json:"data"`
}

// encode turns a message into its stored JSON. A message type of
// LangChainGo's own is kept whole; any other implementation is kept as a
// generic message with its type as the role.
func encode(m llms.ChatMessage) (json.RawMessage, error) {
	if m == nil {
		return nil, fmt.Errorf("message is nil")
	}
	var v any = m
	t := m.GetType()
	switch m.(type) {
	case llms.AIChatMessage, *llms.AIChatMessage, llms.HumanChatMessage, *llms.HumanChatMessage,
		llms.SystemChatMessage, *llms.SystemChatMessage, llms.GenericChatMessage, *llms.GenericChatMessage,
		llms.FunctionChatMessage, *llms.FunctionChatMessage, llms.ToolChatMessage, *llms.ToolChatMessage:
	default:
		g := llms.GenericChatMessage{Role: string(t), Content: m.GetContent()}
		if n, ok := m.(llms.Named); ok {
			g.Name = n.GetName()
		}
		v, t = g, llms.ChatMessageTypeGeneric
	}
	switch ai := v.(type) {
	case llms.AIChatMessage:
		v = aiOf(ai)
	case *llms.AIChatMessage:
		v = aiOf(*ai)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a %s message: %w", t, err)
	}
	return json.Marshal(stored{Type: t, Data: data})
}

// decode turns stored JSON back into a message of LangChainGo's types.
func decode(raw []byte) (llms.ChatMessage, error) {
	var s stored
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, err
	}
	var m llms.ChatMessage
	var err error
	switch s.Type {
	case llms.ChatMessageTypeAI:
		var ai aiMessage
		err = json.Unmarshal(s.Data, &ai)
		m = ai.message()
	case llms.ChatMessageTypeHuman:
		m, err = as[llms.HumanChatMessage](s.Data)
	case llms.ChatMessageTypeSystem:
		m, err = as[llms.SystemChatMessage](s.Data)
	case llms.ChatMessageTypeGeneric:
		m, err = as[llms.GenericChatMessage](s.Data)
	case llms.ChatMessageTypeFunction:
		m, err = as[llms.FunctionChatMessage](s.Data)
	case llms.ChatMessageTypeTool:
		m, err = as[llms.ToolChatMessage](s.Data)
	default:
		return nil, fmt.Errorf("unknown message type %q", s.Type)
	}
	return m, err
}

func as[T llms.ChatMessage](data []byte) (llms.ChatMessage, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// aiMessage is how an AI message is kept. LangChainGo's own JSON for a
// ToolCall (v0.1.14) does not read back its function call, so tool calls
// are kept field by field.
type aiMessage struct {
	Content          string             `json:"content,omitempty"`
	FunctionCall     *llms.FunctionCall `json:"function_call,omitempty"`
	ToolCalls        []toolCall         `json:"tool_calls,omitempty"`
	ReasoningContent string             `json:"reasoning_content,omitempty"`
}

type toolCall struct {
	ID           string             `json:"id"`
	Type         string             `json:"type"`
	FunctionCall *llms.FunctionCall `json:"function,omitempty"`
}

func aiOf(m llms.AIChatMessage) aiMessage {
	a := aiMessage{Content: m.Content, FunctionCall: m.FunctionCall, ReasoningContent: m.ReasoningContent}
	for _, tc := range m.ToolCalls {
		a.ToolCalls = append(a.ToolCalls, toolCall{ID: tc.ID, Type: tc.Type, FunctionCall: tc.FunctionCall})
	}
	return a
}

func (a aiMessage) message() llms.AIChatMessage {
	m := llms.AIChatMessage{Content: a.Content, FunctionCall: a.FunctionCall, ReasoningContent: a.ReasoningContent}
	for _, tc := range a.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, llms.ToolCall{ID: tc.ID, Type: tc.Type, FunctionCall: tc.FunctionCall})
	}
	return m
}
