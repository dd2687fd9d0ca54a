// Command chat runs one turn of a Google ADK agent whose sessions live in a
// state store, so that a conversation survives the process: run it again,
// in another process or on another host sharing the store, and the agent
// continues where the last one stopped.
//
//	go run ./examples/chat -store sqlite:///tmp/chat.db -session s1 -say "hello"
//	go run ./examples/chat -store sqlite:///tmp/chat.db -session s1 -say "still there?"
//
// The model is scripted (no API key needed): it answers with the number of
// the user's turn, what the user said, and what the user said the turn
// before, which it can only know from the stored session.
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"log"
	"os"
	"strings"

	"github.com/statesidecar/state"
	"github.com/statesidecar/state/adapters/adk"
	_ "github.com/statesidecar/state/backend/memstate"
	_ "github.com/statesidecar/state/backend/pgstate"
	_ "github.com/statesidecar/state/backend/redisstate"
	_ "github.com/statesidecar/state/backend/sqlitestate"
	"google.golang.org/adk/v2/agent"
	"google.golang.org/adk/v2/agent/llmagent"
	"google.golang.org/adk/v2/model"
	"google.golang.org/adk/v2/runner"
	"google.golang.org/genai"
)

func main() {
	storeURL := flag.String("store", "sqlite:chat.db", "state store URL")
	sessionID := flag.String("session", "demo", "session id")
	userID := flag.String("user", "me", "user id")
	say := flag.String("say", "hello", "what the user says")
	flag.Parse()
	if err := run(context.Background(), *storeURL, *userID, *sessionID, *say); err != nil {
		log.SetFlags(0)
		log.Fatal(err)
	}
}

func run(ctx context.Context, storeURL, userID, sessionID, say string) error {
	st, err := state.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer st.Close()

	a, err := llmagent.New(llmagent.Config{
		Name:        "echo",
		Description: "remembers what you said",
		Model:       scripted{},
		OutputKey:   "last_reply", // the reply also lands in the session's state
	})
	if err != nil {
		return err
	}
	r, err := runner.New(runner.Config{
		AppName:           "chat",
		Agent:             a,
		SessionService:    adk.NewSessionService(st, nil),
		ArtifactService:   adk.NewArtifactService(st, nil),
		AutoCreateSession: true,
	})
	if err != nil {
		return err
	}
	msg := genai.NewContentFromText(say, genai.RoleUser)
	for ev, err := range r.Run(ctx, userID, sessionID, msg, agent.RunConfig{}) {
		if err != nil {
			return err
		}
		if ev.Content != nil && ev.Author == "echo" && !ev.Partial {
			for _, p := range ev.Content.Parts {
				fmt.Fprintln(os.Stdout, p.Text)
			}
		}
	}
	return nil
}

// scripted is a model.LLM that answers from the conversation it is given.
type scripted struct{}

func (scripted) Name() string { return "scripted" }

func (scripted) GenerateContent(_ context.Context, req *model.LLMRequest, _ bool) iter.Seq2[*model.LLMResponse, error] {
	var said []string
	for _, c := range req.Contents {
		if c.Role == genai.RoleUser {
			for _, p := range c.Parts {
				said = append(said, p.Text)
			}
		}
	}
	reply := fmt.Sprintf("turn %d: you said %q", len(said), said[len(said)-1])
	if len(said) > 1 {
		reply += fmt.Sprintf(", and before that %q", said[len(said)-2])
	}
	return func(yield func(*model.LLMResponse, error) bool) {
		yield(&model.LLMResponse{Content: genai.NewContentFromText(strings.TrimSpace(reply), genai.RoleModel), TurnComplete: true}, nil)
	}
}
