package state

import (
	"context"
	"encoding/json"
)

// MCPStateTool mirrors the McpStateTool interface that agent frameworks
// (Caxton among them) define for state persistence, with its seven
// operations over JSON values. Store.StateTool returns an implementation.
type MCPStateTool interface {
	// Store stores value under key.
	Store(ctx context.Context, key string, value json.RawMessage) error
	// Retrieve returns the value at key, or nil (and no error) when there is
	// none. A stored JSON null is returned as the bytes "null".
	Retrieve(ctx context.Context, key string) (json.RawMessage, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// List returns every key starting with prefix, in byte order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Exists reports whether key holds a value.
	Exists(ctx context.Context, key string) (bool, error)
	// BatchStore stores every item atomically: all or none.
	BatchStore(ctx context.Context, items []KeyValue) error
	// BatchRetrieve returns one value per key, in order, nil where missing.
	BatchRetrieve(ctx context.Context, keys []string) ([]json.RawMessage, error)
}

// A KeyValue is one item of MCPStateTool.BatchStore.
type KeyValue struct {
	Key   string
	Value json.RawMessage
}

// StateTool returns the store, in its namespace, as an MCPStateTool.
func (s *Store) StateTool() MCPStateTool { return stateTool{s} }

type stateTool struct{ s *Store }

var _ MCPStateTool = stateTool{}

func (t stateTool) Store(ctx context.Context, key string, value json.RawMessage) error {
	_, err := t.s.Set(ctx, key, value)
	return err
}

func (t stateTool) Retrieve(ctx context.Context, key string) (json.RawMessage, error) {
	e, err := t.s.Get(ctx, key)
	if isNotFound(err) {
		return nil, nil
	}
	return e.Value, err
}

func (t stateTool) Delete(ctx context.Context, key string) error {
	_, err := t.s.Delete(ctx, key)
	return err
}

func (t stateTool) List(ctx context.Context, prefix string) ([]string, error) {
	keys := []string{}
	cursor := ""
	for {
		p, err := t.s.List(ctx, prefix, WithLimit(MaxListLimit), WithCursor(cursor))
		if err != nil {
			return nil, err
		}
		keys = append(keys, p.Keys...)
		if p.NextCursor == "" {
			return keys, nil
		}
		cursor = p.NextCursor
	}
}

func (t stateTool) Exists(ctx context.Context, key string) (bool, error) {
	return t.s.Exists(ctx, key)
}

func (t stateTool) BatchStore(ctx context.Context, items []KeyValue) error {
	its := make([]Item, len(items))
	for i, kv := range items {
		its[i] = Item{Key: kv.Key, Value: kv.Value}
	}
	_, err := t.s.SetMany(ctx, its)
	return err
}

func (t stateTool) BatchRetrieve(ctx context.Context, keys []string) ([]json.RawMessage, error) {
	es, err := t.s.GetMany(ctx, keys)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(es))
	for i, e := range es {
		if e.Found() {
			out[i] = e.Value
		}
	}
	return out, nil
}
