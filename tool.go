package agentflow

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/effects"
	"github.com/agentflow/agentflow/internal/tools"
)

// A tool kind of your own, and what its Build and Run are given.
type (
	// Tool is a tool kind: its name (what a catalog's `kind` names), its
	// default description and JSON Schema of arguments, whether it runs
	// as a local activity, its default approval, and Build, which makes
	// the runner of one catalog entry. Func makes one from a Go function.
	Tool = tools.Kind
	// ToolSpec is a catalog entry of the kind, as Build is given it.
	ToolSpec = agent.Tool
	// ToolDeps are what the runtime gives Build: a logger, secrets by
	// reference, the operator's egress policy…
	ToolDeps = tools.Deps
	// ToolRunner runs the calls of one entry: Run(ctx, Call).
	ToolRunner = tools.Tool
	// Call is one call: the model's arguments, whose call it is, and the
	// runtime's services for it (HTTP under the tenant's egress, data by
	// reference, progress).
	Call = tools.Call
	// Output is a call's result: the text the model reads, and data.
	Output = tools.Output
)

// FuncOption changes what Func makes.
type FuncOption func(*funcTool)

// ReadOnly says the function changes nothing: its calls need no approval
// and are called again freely when an attempt is retried.
func ReadOnly() FuncOption {
	return func(f *funcTool) { f.approval, f.idempotent = agent.ApprovalNever, true }
}

// Idempotent says calling the function again with the same arguments
// changes nothing more (it deduplicates by Call.CallID, say): a retried
// attempt calls it again. Its calls still ask for approval unless the
// catalog says otherwise.
func Idempotent() FuncOption { return func(f *funcTool) { f.idempotent = true } }

// Local runs the function's calls as local activities (quick,
// in-process work of milliseconds), unless a catalog entry says
// `execution: activity`.
func Local() FuncOption { return func(f *funcTool) { f.local = true } }

// kindName is what a kind may be named: what a catalog's `kind` takes.
var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// Func makes a tool kind of fn. The JSON Schema of its arguments is
// In's (github.com/google/jsonschema-go: exported fields by their json
// names, `jsonschema:"…"` tags for descriptions), and a call's arguments
// are checked against it before fn runs: what does not fit goes back to
// the model to fix. fn's result is what the model reads: a string as it
// is, anything else as its JSON.
//
// By default a function may change things: its calls ask for approval
// (a catalog's `approval` can say otherwise, or ReadOnly), and a retried
// attempt never calls it again blindly once an attempt may have (the
// model is told the outcome is unknown) — Idempotent lifts that. Func
// panics on a name a kind cannot have or an In without a schema: both
// are programming errors, found at start.
func Func[In, Out any](name, description string, fn func(ctx context.Context, in In) (Out, error), opts ...FuncOption) Tool {
	if !kindName.MatchString(name) {
		panic(fmt.Sprintf("agentflow.Func: name %q: want lowercase letters, digits and _, starting with a letter", name))
	}
	schema, err := jsonschema.For[In](nil)
	if err != nil {
		panic(fmt.Sprintf("agentflow.Func %s: the schema of its input: %v", name, err))
	}
	resolved, err := schema.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("agentflow.Func %s: the schema of its input: %v", name, err))
	}
	params, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("agentflow.Func %s: the schema of its input: %v", name, err))
	}
	f := &funcTool{name: name, approval: agent.ApprovalAlways}
	for _, o := range opts {
		o(f)
	}
	run := func(ctx context.Context, args json.RawMessage) (string, error) {
		var raw any
		if err := json.Unmarshal(args, &raw); err != nil {
			return "", agent.Errorf(agent.CodeInvalid, "arguments: %s", err)
		}
		if err := resolved.Validate(raw); err != nil {
			return "", agent.Errorf(agent.CodeInvalid, "arguments: %s", err)
		}
		var in In
		if err := json.Unmarshal(args, &in); err != nil {
			return "", agent.Errorf(agent.CodeInvalid, "arguments: %s", err)
		}
		out, err := fn(ctx, in)
		if err != nil {
			return "", err
		}
		return text(out)
	}
	f.run = run
	return Tool{
		Name: name, Description: description, Parameters: params,
		Local: f.local, Approval: f.approval,
		Build: func(agent.Tool, tools.Deps) (tools.Tool, error) { return f, nil },
	}
}

// funcTool runs a Go function's calls.
type funcTool struct {
	name       string
	approval   string
	idempotent bool
	local      bool
	run        func(ctx context.Context, args json.RawMessage) (string, error)
}

// Run calls the function once per call: a call delivered at most once
// records its intent first (internal/effects), so that an attempt after
// one that may have called it does not call it again.
func (f *funcTool) Run(ctx context.Context, call tools.Call) (tools.Output, error) {
	gate := effects.From(ctx)
	if gate != nil && !f.idempotent {
		if err := gate.Begin(ctx, "the Go function "+f.name); err != nil {
			return tools.Output{}, err
		}
		defer gate.Answered(ctx, 0)
	}
	s, err := f.run(ctx, call.Args)
	if err != nil {
		return tools.Output{}, err
	}
	return tools.Output{Text: s}, nil
}

// text is what the model reads of a function's result.
func text(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("the result: %w", err)
	}
	return string(b), nil
}
