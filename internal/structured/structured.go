// Package structured holds a turn to an output schema: it compiles the
// JSON Schema an agent (output_schema in the catalog) or a turn request
// names, and checks the model's final answer against it.
//
// It imports only the domain: it must not import the activities or the
// registry, which call it.
//
// The catalog compiles an agent's schema when it is applied and the
// gateway a request's when the turn is asked for, so that a schema that
// does not compile is refused before anything is sent to a model. The
// CallModel activity checks each final answer: a valid one becomes the
// result's output_json, an invalid one is described (Problems) for the
// one repair call the turn makes (RepairPrompt), and the turn fails
// InvalidOutput when the repaired answer does not match either.
package structured

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/agentflow/agentflow/internal/agent"
)

// maxProblems bounds the problems an answer's check reports: the repair
// call reads them, and a long list helps no model.
const maxProblems = 20

// schemaURL is the schema's name inside the compiler; it never reaches
// whoever wrote the schema (cleanError).
const schemaURL = "mem://output/schema.json"

// Schema is a compiled output schema. It is safe for concurrent use.
type Schema struct {
	s *jsonschema.Schema
}

// Compile compiles an output schema: a JSON Schema (draft 2020-12 unless
// it says otherwise) of at most agent.MaxOutputSchemaBytes whose root
// describes a JSON object ("type": "object"), as providers' structured
// output requires, and that refers to nothing outside itself. Anything
// else is an agent.CodeInvalid error that says what is wrong. No schema
// (empty, or JSON null: agent.HasOutputSchema) compiles to nil.
func Compile(raw json.RawMessage) (*Schema, error) {
	if err := agent.CheckOutputSchema(raw); err != nil {
		return nil, err
	}
	return compile(raw, "output")
}

// CompileInput compiles an agent's input schema (agent.Agent.InputSchema)
// by the rules of Compile, its errors naming it an input schema. Check
// then checks a call's arguments against it.
func CompileInput(raw json.RawMessage) (*Schema, error) {
	if err := agent.CheckInputSchema(raw); err != nil {
		return nil, err
	}
	return compile(raw, "input")
}

// compile compiles a schema checked already, of kind "output" or "input".
func compile(raw json.RawMessage, kind string) (*Schema, error) {
	if !agent.HasOutputSchema(raw) {
		return nil, nil
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s schema is not JSON: %v", kind, err)
	}
	c := jsonschema.NewCompiler()
	// A tenant's schema must not read the worker's files or the network.
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, agent.WithCode(agent.CodeInvalid, &CompileError{Kind: kind, Message: cleanError(err).Error()})
	}
	s, err := c.Compile(schemaURL)
	if err != nil {
		ce := compileError(err)
		ce.Kind = kind
		return nil, agent.WithCode(agent.CodeInvalid, ce)
	}
	return &Schema{s: s}, nil
}

// CompileError is a schema that does not compile: where, and why.
type CompileError struct {
	// Kind is the schema's: "output" (when empty) or "input".
	Kind string
	// Pointer is the JSON Pointer of the value in the schema the problem
	// is about, when the compiler says; "" otherwise.
	Pointer string
	Message string
}

func (e *CompileError) Error() string {
	kind := cmp.Or(e.Kind, "output")
	if e.Pointer == "" {
		return kind + " schema does not compile: " + e.Message
	}
	return kind + " schema does not compile: " + e.Pointer + ": " + e.Message
}

// compileError describes a compiler's error: a schema that breaks its
// meta-schema at the first value it breaks it, anything else as the
// compiler says.
func compileError(err error) *CompileError {
	if se, ok := errors.AsType[*jsonschema.SchemaValidationError](err); ok {
		if ps := problems(se.Err); len(ps) > 0 {
			return &CompileError{Pointer: ps[0].Pointer, Message: ps[0].Message}
		}
	}
	return &CompileError{Message: cleanError(err).Error()}
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("refers to %s: a schema may only refer within itself", url)
}

// cleanError drops the compiler's in-memory URL, which means nothing to
// whoever wrote the schema.
func cleanError(err error) error {
	msg := err.Error()
	for _, u := range []string{schemaURL + "#", schemaURL} {
		msg = strings.ReplaceAll(msg, u, "")
	}
	return errors.New(msg)
}

// Check reads a final answer as JSON and validates it. A valid answer is
// returned as compact JSON, with problems nil. An answer the model
// fenced as a Markdown code block (```json … ```) is read inside the
// fence: some providers without a native structured-output option
// answer so. Otherwise problems says what is wrong, each problem with the
// JSON Pointer of the value it is about.
func (s *Schema) Check(answer string) (json.RawMessage, Problems) {
	return s.check([]byte(Unfence(answer)), "the answer is")
}

// CheckArguments reads a tool call's arguments (a JSON object, from a
// client) and validates them against an input schema (CompileInput).
// Valid arguments are returned as compact JSON, in the order the client
// sent them, with problems nil; otherwise problems says what is wrong,
// each problem with the JSON Pointer of the value it is about.
func (s *Schema) CheckArguments(raw json.RawMessage) (json.RawMessage, Problems) {
	return s.check(raw, "the arguments are")
}

// check reads data as JSON and validates it, as Check and CheckArguments
// do; what ("the answer is") opens a problem that it is not JSON.
func (s *Schema) check(data []byte, what string) (json.RawMessage, Problems) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, Problems{{Message: fmt.Sprintf("%s not JSON: %v", what, err)}}
	}
	if err := s.s.Validate(doc); err != nil {
		return nil, problems(err)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, data); err != nil {
		// jsonschema read it as JSON; encoding/json is stricter only
		// about things that do not parse at all.
		return nil, Problems{{Message: fmt.Sprintf("%s not JSON: %v", what, err)}}
	}
	return out.Bytes(), nil
}

// Unfence returns the text inside a Markdown code fence that is the
// whole answer (```json … ``` or ``` … ```), or the answer trimmed.
func Unfence(answer string) string {
	t := strings.TrimSpace(answer)
	if !strings.HasPrefix(t, "```") || !strings.HasSuffix(t, "```") || len(t) < 6 {
		return t
	}
	inner := t[3 : len(t)-3]
	first, rest, ok := strings.Cut(inner, "\n")
	if !ok {
		return t
	}
	if lang := strings.TrimSpace(first); lang != "" && !strings.EqualFold(lang, "json") {
		return t
	}
	return strings.TrimSpace(rest)
}

// Problem is one way a JSON document does not match its schema (an
// answer its output schema, a process definition its rules).
type Problem struct {
	// Pointer is the JSON Pointer of the value it is about; "" for the
	// whole document.
	Pointer string
	Message string
}

func (p Problem) String() string {
	if p.Pointer == "" {
		return p.Message
	}
	return p.Pointer + ": " + p.Message
}

// Problems lists what is wrong with a document. As an error it is every
// problem, one after another.
type Problems []Problem

// String is the problems in one line, "; " between them.
func (ps Problems) String() string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}

func (ps Problems) Error() string { return ps.String() }

var printer = message.NewPrinter(language.English)

// ValidationProblems lists the leaves of a jsonschema validation error's
// tree, each at its instance location, each once; another error is one
// problem about the whole document.
func ValidationProblems(err error) Problems {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return Problems{{Message: err.Error()}}
	}
	var out Problems
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			p := Problem{Pointer: Pointer(e.InstanceLocation), Message: e.ErrorKind.LocalizedString(printer)}
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return out
}

// problems is ValidationProblems, at most maxProblems of them.
func problems(err error) Problems {
	out := ValidationProblems(err)
	if len(out) > maxProblems {
		out = append(out[:maxProblems], Problem{Message: fmt.Sprintf("and %d more problems", len(out)-maxProblems)})
	}
	return out
}

// Pointer is the JSON Pointer (RFC 6901) of a path of tokens.
func Pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(t))
	}
	return b.String()
}

// RepairPrompt is what the repair call tells the model after an answer
// that did not match the schema: the problems, and what to do.
func RepairPrompt(problems string) string {
	return "Your answer does not match the required output schema: " + problems +
		". Answer again with only a JSON value that matches the schema, and nothing else."
}
