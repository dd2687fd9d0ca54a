package langchaingo_test

import (
	"context"
	"fmt"
	"log"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/langchaingo"
	_ "github.com/statesidecar/state/backend/memstate"
	"github.com/tmc/langchaingo/memory"
)

// A LangChainGo conversation buffer whose messages live in the store: any
// process opening the same store and conversation id continues it.
func ExampleNewChatMessageHistory() {
	ctx := context.Background()
	st, err := state.Open(ctx, "mem://") // or sqlite:///var/lib/agent/state.db, redis://...
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	h, err := langchaingo.NewChatMessageHistory(st, "conversation-42", nil)
	if err != nil {
		log.Fatal(err)
	}
	mem := memory.NewConversationBuffer(memory.WithChatHistory(h))

	err = mem.SaveContext(ctx, map[string]any{"input": "hi, I'm Ada"}, map[string]any{"output": "hello Ada"})
	if err != nil {
		log.Fatal(err)
	}
	vars, err := mem.LoadMemoryVariables(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(vars["history"])
	// Output:
	// Human: hi, I'm Ada
	// AI: hello Ada
}
