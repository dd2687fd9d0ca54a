package mcpadapter_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/statesidecar/state/mcpadapter"
	"github.com/statesidecar/state/statetest"
)

// The rules below are those of the MCP Inspector's tool-schema portability
// check (@modelcontextprotocol/inspector 2.12.0, `--method tools/list
// --strict`), written again in Go so that every test run holds the schemas
// to them; cmd/state-sidecar's TestInspectorSchemaCheck runs the Inspector
// itself when interop/inspector is installed.
//
//   - type-union: "type" is an array (["string","null"]): a host that maps
//     schemas onto a single-type dialect rejects the tool or drops the rule.
//   - untyped-schema: a schema with no validation keyword at all ({} or only
//     a description), which accepts anything and tells a model nothing.
//   - boolean-schema: a bare true or false where a schema object goes.
//   - remote-ref: a $ref outside the document, which clients do not fetch.

// constraining are the keywords that make a schema say something.
var constraining = []string{
	"type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum",
	"maxLength", "minLength", "pattern", "format", "contentMediaType", "contentEncoding", "contentSchema",
	"maxItems", "minItems", "uniqueItems", "maxContains", "minContains", "maxProperties", "minProperties",
	"required", "dependentRequired", "allOf", "anyOf", "oneOf", "not", "items", "prefixItems", "contains",
	"additionalItems", "unevaluatedItems", "properties", "patternProperties", "additionalProperties",
	"unevaluatedProperties", "propertyNames", "dependentSchemas", "dependencies", "$ref", "$dynamicRef",
	"$recursiveRef",
}

// Where subschemas sit: one schema, an array of schemas, a map of schemas.
var (
	oneSchema   = []string{"items", "additionalItems", "unevaluatedItems", "contains", "not", "propertyNames", "if", "then", "else", "additionalProperties", "unevaluatedProperties", "contentSchema"}
	schemaList  = []string{"allOf", "anyOf", "oneOf", "prefixItems"}
	schemaMap   = []string{"properties", "patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
	booleanOKIn = []string{"additionalProperties", "unevaluatedProperties", "additionalItems", "unevaluatedItems", "items", "contains", "propertyNames", "if", "then", "else", "not"}
)

// portability returns the findings of the rules above in schema, each as
// "path: rule".
func portability(schema any) []string {
	var out []string
	var walk func(node any, path, keyword string)
	walk = func(node any, path, keyword string) {
		if b, ok := node.(bool); ok {
			if !slices.Contains(booleanOKIn, keyword) {
				out = append(out, fmt.Sprintf("%s: boolean-schema (%v)", path, b))
			}
			return
		}
		m, ok := node.(map[string]any)
		if !ok {
			return
		}
		if _, ok := m["type"].([]any); ok {
			out = append(out, path+": type-union")
		}
		if ref, ok := m["$ref"].(string); ok && ref != "" && !strings.HasPrefix(ref, "#") {
			out = append(out, path+": remote-ref")
		}
		constrains := slices.ContainsFunc(constraining, func(k string) bool { _, ok := m[k]; return ok })
		_, hasIf := m["if"]
		_, hasThen := m["then"]
		_, hasElse := m["else"]
		if !constrains && !(hasIf && (hasThen || hasElse)) && keyword != "not" {
			out = append(out, path+": untyped-schema")
		}
		for _, k := range schemaMap {
			if sub, ok := m[k].(map[string]any); ok {
				for name, s := range sub {
					walk(s, path+"."+k+"."+name, k)
				}
			}
		}
		for _, k := range schemaList {
			if list, ok := m[k].([]any); ok {
				for i, s := range list {
					walk(s, fmt.Sprintf("%s.%s[%d]", path, k, i), k)
				}
			}
		}
		for _, k := range oneSchema {
			v, ok := m[k]
			if !ok {
				continue
			}
			if list, isList := v.([]any); isList && k == "items" {
				for i, s := range list {
					walk(s, fmt.Sprintf("%s.%s[%d]", path, k, i), k)
				}
				continue
			}
			walk(v, path+"."+k, k)
		}
	}
	walk(schema, "", "")
	return out
}

// TestPortabilityRulesFind proves the checker finds what the Inspector
// reported before the schemas were rewritten, so that a clean result below
// means something.
func TestPortabilityRulesFind(t *testing.T) {
	for _, c := range []struct{ schema, want string }{
		{`{"type":"object","properties":{"a":{"type":["string","null"]}}}`, ".properties.a: type-union"},
		{`{"type":"object","properties":{"value":{}}}`, ".properties.value: untyped-schema"},
		{`{"type":"object","properties":{"value":{"description":"any"}}}`, ".properties.value: untyped-schema"},
		{`{"type":"object","additionalProperties":{}}`, ".additionalProperties: untyped-schema"},
		{`{"type":"object","properties":{"a":true}}`, ".properties.a: boolean-schema (true)"},
		{`{"type":"object","properties":{"a":{"$ref":"https://example.com/s.json"}}}`, ".properties.a: remote-ref"},
		{`{"anyOf":[{"type":"string"},{}]}`, ".anyOf[1]: untyped-schema"},
	} {
		var s any
		if err := json.Unmarshal([]byte(c.schema), &s); err != nil {
			t.Fatal(err)
		}
		if got := portability(s); !slices.Contains(got, c.want) {
			t.Errorf("portability(%s) = %q, want it to contain %q", c.schema, got, c.want)
		}
	}
	var fine any
	_ = json.Unmarshal([]byte(`{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"type":"null"}]},"b":{"not":{}}},"additionalProperties":false}`), &fine)
	if got := portability(fine); len(got) > 0 {
		t.Errorf("portability of a portable schema = %q, want nothing", got)
	}
	if got := duplicateKey([]byte(`{"a":[{"b":1}],"c":{"type":"number","description":"x","description":"y"}}`)); got != "description" {
		t.Errorf("duplicateKey = %q, want description", got)
	}
	if got := duplicateKey([]byte(`{"a":["a","a"],"b":{"a":{"a":1}},"c":"a"}`)); got != "" {
		t.Errorf("duplicateKey of an object without duplicates = %q", got)
	}
}

// TestSchemasArePortable checks every tool's input and output schema, as
// the tools are built with every option that changes a schema, against the
// Inspector's portability rules: no type arrays, no untyped schemas, no
// boolean schemas, no remote references.
func TestSchemasArePortable(t *testing.T) {
	st, _ := statetest.NewStore(t)
	for _, opts := range []*mcpadapter.Options{nil, {Prefix: "coord_", ClaimTTL: 90e9, AllowReset: true}} {
		tools := mcpadapter.Tools(st, opts)
		if len(tools) != 21 {
			t.Fatalf("%d tools, want 21", len(tools))
		}
		for _, tl := range tools {
			for kind, raw := range map[string]json.RawMessage{"inputSchema": tl.Tool.RawInputSchema, "outputSchema": tl.Tool.RawOutputSchema} {
				var s any
				if err := json.Unmarshal(raw, &s); err != nil {
					t.Fatalf("%s %s: %v", tl.Tool.Name, kind, err)
				}
				for _, f := range portability(s) {
					t.Errorf("tool %s: %s%s", tl.Tool.Name, kind, f)
				}
				if dup := duplicateKey(raw); dup != "" {
					t.Errorf("tool %s: %s has the key %q twice in one object", tl.Tool.Name, kind, dup)
				}
			}
		}
	}
}

// duplicateKey returns a key that some object of the JSON text b has twice,
// or "" (encoding/json would silently keep the last one).
func duplicateKey(b []byte) string {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.obj {
					top.expect = true
				}
				stack = append(stack, &frame{obj: v == '{', keys: map[string]bool{}, expect: v == '{'})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].expect = true
				}
			}
		case string:
			if top != nil && top.obj && top.expect {
				if top.keys[v] {
					return v
				}
				top.keys[v] = true
				top.expect = false
				continue
			}
			if top != nil && top.obj {
				top.expect = true
			}
		default:
			if top != nil && top.obj {
				top.expect = true
			}
		}
	}
}
