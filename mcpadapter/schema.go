package mcpadapter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// obj is a JSON object that keeps its keys in order.
type obj []member

type member struct {
	k string
	v any
}

// MarshalJSON writes the members in order.
func (o obj) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.k)
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.v)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// inputSchema is the JSON Schema of a tool's arguments: the parameters in
// order, the required ones listed, no others allowed.
func inputSchema(t *tool, o *Options) json.RawMessage {
	props := obj{}
	var required []string
	for _, p := range t.params {
		if p.name == "claim_ttl_seconds" && o.ClaimTTL > 0 {
			p.desc = fmt.Sprintf("How long the claim lasts without a heartbeat, in seconds. Defaults to %g.", o.ClaimTTL.Seconds())
		}
		props = append(props, member{p.name, p.schema()})
		if p.required {
			required = append(required, p.name)
		}
	}
	s := obj{{"type", "object"}, {"properties", props}}
	if len(required) > 0 {
		s = append(s, member{"required", required})
	}
	s = append(s, member{"additionalProperties", false})
	return mustJSON(s)
}

// schema is the JSON Schema of one parameter.
func (p *param) schema() obj {
	var s obj
	switch p.kind {
	case kString:
		s = obj{{"type", "string"}}
	case kJSON:
		s = anyJSON()
	case kSeconds:
		s = obj{{"type", "number"}, {"exclusiveMinimum", 0}}
		if p.max > 0 {
			s = append(s, member{"maximum", p.max.Seconds()})
		}
	case kInt:
		s = obj{{"type", "integer"}, {"minimum", p.min}}
	case kBool:
		s = obj{{"type", "boolean"}}
	case kTags:
		s = obj{{"type", "object"}, {"additionalProperties", obj{{"type", "string"}}}}
	case kObject:
		s = obj{{"type", "object"}}
	case kEnum:
		s = obj{{"type", "string"}, {"enum", p.enum}}
	case kEnumList:
		s = obj{{"type", "array"}, {"items", obj{{"type", "string"}, {"enum", p.enum}}}, {"uniqueItems", true}}
	}
	if p.def != nil {
		s = append(s, member{"default", p.def})
	}
	return append(s, member{"description", p.desc})
}

// outputSchema is the JSON Schema of a tool's result, derived from the Go
// type that encodes it, so that the two cannot drift apart.
func outputSchema(result any) json.RawMessage {
	return mustJSON(schemaOf(reflect.TypeOf(result)))
}

// A schemer is a result type that states its own JSON Schema.
type schemer interface{ jsonSchema() obj }

var (
	schemerType = reflect.TypeFor[schemer]()
	rawType     = reflect.TypeFor[json.RawMessage]()
)

// schemaOf describes the JSON encoding/json gives a value of type t: every
// struct field is present (required) unless it is omitempty, and a pointer
// may be null.
func schemaOf(t reflect.Type) obj {
	if t.Kind() == reflect.Pointer {
		return nullable(schemaOf(t.Elem()))
	}
	if t.Implements(schemerType) {
		return reflect.Zero(t).Interface().(schemer).jsonSchema()
	}
	switch t.Kind() {
	case reflect.Bool:
		return obj{{"type", "boolean"}}
	case reflect.Int, reflect.Int64:
		return obj{{"type", "integer"}}
	case reflect.Float64:
		return obj{{"type", "number"}}
	case reflect.String:
		return obj{{"type", "string"}}
	case reflect.Map:
		return obj{{"type", "object"}, {"additionalProperties", schemaOf(t.Elem())}}
	case reflect.Slice:
		if t == rawType {
			return anyJSON()
		}
		return obj{{"type", "array"}, {"items", schemaOf(t.Elem())}}
	case reflect.Struct:
		props := obj{}
		var required []string
		for f := range t.Fields() {
			name, flags, _ := strings.Cut(f.Tag.Get("json"), ",")
			s := schemaOf(f.Type)
			if d := f.Tag.Get("desc"); d != "" {
				if own, ok := s.get("description").(string); ok {
					d += " (" + own + ")" // such as "epoch seconds"
				}
				s = s.with("description", d)
			}
			props = append(props, member{name, s})
			if flags != "omitempty" {
				required = append(required, name)
			}
		}
		return obj{{"type", "object"}, {"properties", props}, {"required", required}}
	}
	panic("mcpadapter: no JSON Schema for " + t.String())
}

// The schemas are written for portability across MCP hosts, as the MCP
// Inspector's schema check asks: every schema states a type or combines
// schemas that do, and "type" is always a single name. A host that maps tool
// schemas onto a single-type dialect (the OpenAPI subset of Gemini's function
// declarations, say) rejects `"type": ["string", "null"]` or drops it, and
// `{}` tells a model nothing. So "may be null" is an anyOf with a null
// branch, and "any JSON value" is an anyOf of the six JSON types, which
// means exactly what `{}` meant. portable_test.go holds the schemas to it.

// anyJSON is the schema of any JSON value, spelled out.
func anyJSON() obj {
	return obj{{"anyOf", []obj{
		{{"type", "object"}}, {{"type", "array"}}, {{"type", "string"}},
		{{"type", "number"}}, {{"type", "boolean"}}, {{"type", "null"}},
	}}}
}

// nullable lets s also be null: anyOf s or null. A description of s moves
// to the combined schema, where hosts look for it.
func nullable(s obj) obj {
	if s.allowsNull() {
		return s
	}
	var inner, outer obj
	for _, m := range s {
		if m.k == "description" {
			outer = append(outer, m)
		} else {
			inner = append(inner, m)
		}
	}
	return append(obj{{"anyOf", []obj{inner, {{"type", "null"}}}}}, outer...)
}

// allowsNull reports whether s is an anyOf with a null branch (anyJSON or a
// nullable schema).
func (s obj) allowsNull() bool {
	for _, m := range s {
		if branches, ok := m.v.([]obj); ok && m.k == "anyOf" {
			for _, b := range branches {
				if len(b) == 1 && b[0].k == "type" && b[0].v == "null" {
					return true
				}
			}
		}
	}
	return false
}

// get returns the value of member k, or nil.
func (s obj) get(k string) any {
	for _, m := range s {
		if m.k == k {
			return m.v
		}
	}
	return nil
}

// with returns s with member k set to v: replaced where s has it, appended
// otherwise (a key written twice would leave its meaning to the parser).
func (s obj) with(k string, v any) obj {
	out := make(obj, 0, len(s)+1)
	done := false
	for _, m := range s {
		if m.k == k {
			m.v, done = v, true
		}
		out = append(out, m)
	}
	if !done {
		out = append(out, member{k, v})
	}
	return out
}

// mustJSON encodes a value built from this package's own tables.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mcpadapter: " + err.Error())
	}
	return b
}
