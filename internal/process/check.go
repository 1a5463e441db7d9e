package process

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/structured"
	"github.com/agentflow/agentflow/internal/words"
)

// Bounds of a definition. A process is a graph a person can read; these
// keep a mistaken document or a runaway patch from growing without end.
const (
	MaxDefinitionBytes = 1 << 20
	MaxSchemaBytes     = 256 << 10
	MaxNodes           = 1000
	MaxEdges           = 5000
	// maxProblems bounds the problems Check reports.
	maxProblems = 20
)

// BuiltinSchema is the shape every definition has. It leaves nodes and
// edges open to more fields (name, config, condition, …): a catalog's
// schema says more where a tenant wants it to.
const BuiltinSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "required": ["nodes", "edges"],
  "properties": {
    "nodes": {
      "type": "array",
      "description": "The steps of the process.",
      "items": {
        "type": "object",
        "required": ["id", "type"],
        "properties": {
          "id": {"type": "string", "minLength": 1, "maxLength": 128, "description": "Unique among the nodes."},
          "type": {"type": "string", "minLength": 1, "maxLength": 128, "description": "What the node does, e.g. task or condition."}
        }
      }
    },
    "edges": {
      "type": "array",
      "description": "What runs after what: from one node's id to another's.",
      "items": {
        "type": "object",
        "required": ["from", "to"],
        "properties": {
          "from": {"type": "string", "minLength": 1},
          "to": {"type": "string", "minLength": 1}
        }
      }
    }
  }
}`

// builtin is BuiltinSchema compiled; it is a constant, so compiling it
// cannot fail at run time (a test compiles it too).
var builtin = func() *jsonschema.Schema {
	s, err := compile("builtin", []byte(BuiltinSchema))
	if err != nil {
		panic("process: built-in schema: " + err.Error())
	}
	return s
}()

// Problem is one thing wrong with a definition, and Problems a list of
// them, as an error: agent.CodeInvalid with every problem, one after
// another. They are the JSON Schema checks' own (internal/structured).
type (
	Problem  = structured.Problem
	Problems = structured.Problems
)

// Schema checks definitions: the built-in rules, and a catalog's JSON
// Schema when it gave one. It is safe for concurrent use.
type Schema struct {
	extra *jsonschema.Schema // nil: the built-in rules only
}

// Compile returns the Schema of a process whose catalog entry gives schema
// (a JSON Schema; empty: none). A schema that does not compile, or refers
// to another document, is agent.CodeInvalid.
func Compile(schema json.RawMessage) (*Schema, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return &Schema{}, nil
	}
	if len(schema) > MaxSchemaBytes {
		return nil, agent.Errorf(agent.CodeInvalid, "schema is %d bytes; the limit is %d", len(schema), MaxSchemaBytes)
	}
	s, err := compile("process", schema)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "schema: %v", err)
	}
	return &Schema{extra: s}, nil
}

func compile(name string, schema []byte) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	// A tenant's schema must not read the worker's files or the network.
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	url := "mem://process/" + name + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, cleanCompileError(err)
	}
	return s, nil
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refers to %s: a process schema may only refer within itself", url)
}

// cleanCompileError drops the compiler's in-memory URLs, which mean
// nothing to whoever wrote the schema.
func cleanCompileError(err error) error {
	msg := err.Error()
	for _, u := range []string{"mem://process/process.json#", "mem://process/process.json"} {
		msg = strings.ReplaceAll(msg, u, "")
	}
	return errors.New(msg)
}

// Check reports what is wrong with def (nil: nothing). def must be JSON.
func (s *Schema) Check(def json.RawMessage) Problems {
	if len(def) > MaxDefinitionBytes {
		return Problems{{Message: fmt.Sprintf("the definition is %d bytes; the limit is %d", len(def), MaxDefinitionBytes)}}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(def))
	if err != nil {
		return Problems{{Message: fmt.Sprintf("the definition is not JSON: %v", err)}}
	}
	ps := schemaProblems(builtin, doc)
	if len(ps) == 0 {
		ps = graphProblems(doc)
	}
	if s != nil && s.extra != nil {
		ps = append(ps, schemaProblems(s.extra, doc)...)
	}
	if len(ps) > maxProblems {
		ps = append(ps[:maxProblems], Problem{Message: fmt.Sprintf("and %d more problems", len(ps)-maxProblems)})
	}
	return ps
}

// schemaProblems validates doc and lists the leaves of the error tree,
// each at its instance location.
func schemaProblems(s *jsonschema.Schema, doc any) Problems {
	if err := s.Validate(doc); err != nil {
		return structured.ValidationProblems(err)
	}
	return nil
}

// graphProblems checks what the schema cannot: unique node ids, edges
// between existing nodes, and the bounds. doc satisfies BuiltinSchema.
func graphProblems(doc any) Problems {
	obj := doc.(map[string]any)
	nodes, _ := obj["nodes"].([]any)
	edges, _ := obj["edges"].([]any)
	var out Problems
	if len(nodes) > MaxNodes {
		out = append(out, Problem{Pointer: "/nodes", Message: fmt.Sprintf("%d nodes; the limit is %d", len(nodes), MaxNodes)})
	}
	if len(edges) > MaxEdges {
		out = append(out, Problem{Pointer: "/edges", Message: fmt.Sprintf("%d edges; the limit is %d", len(edges), MaxEdges)})
	}
	first := map[string]int{}
	var ids []string
	for i, n := range nodes {
		id := n.(map[string]any)["id"].(string)
		if j, dup := first[id]; dup {
			out = append(out, Problem{Pointer: fmt.Sprintf("/nodes/%d/id", i),
				Message: fmt.Sprintf("node id %q is already used by /nodes/%d; ids must be unique", id, j)})
			continue
		}
		first[id] = i
		ids = append(ids, id)
	}
	for i, e := range edges {
		edge := e.(map[string]any)
		for _, end := range []string{"from", "to"} {
			id := edge[end].(string)
			if _, ok := first[id]; !ok {
				out = append(out, Problem{Pointer: fmt.Sprintf("/edges/%d/%s", i, end),
					Message: fmt.Sprintf("no node has id %q (nodes: %s)", id, listIDs(ids))})
			}
		}
	}
	return out
}

// listIDs names the nodes for a message, the first few of them.
func listIDs(ids []string) string { return words.Listed(ids, 12) }

// Pointer is the JSON Pointer (RFC 6901) of a path of tokens.
func Pointer(tokens []string) string { return structured.Pointer(tokens) }

// Tokens splits a JSON Pointer into its unescaped tokens; ok is false
// when p is not a JSON Pointer ("" is the whole document: no tokens).
func Tokens(p string) ([]string, bool) {
	if p == "" {
		return nil, true
	}
	if p[0] != '/' {
		return nil, false
	}
	parts := strings.Split(p[1:], "/")
	for i, part := range parts {
		for j := 0; j < len(part); j++ {
			if part[j] == '~' && (j+1 == len(part) || (part[j+1] != '0' && part[j+1] != '1')) {
				return nil, false
			}
		}
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
	}
	return parts, true
}

// index reads an array index token: digits without leading zeros.
func index(tok string) (int, bool) {
	if tok == "" || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for _, c := range tok {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}
