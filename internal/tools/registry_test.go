package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/tools/kind"
)

// toolFunc adapts a function to Tool.
type toolFunc func(ctx context.Context, args json.RawMessage) (Output, error)

func (f toolFunc) Run(ctx context.Context, call Call) (Output, error) { return f(ctx, call.Args) }

// echoKind builds tools that return their config and arguments, counting
// builds; config "bad" is rejected.
func echoKind(builds *atomic.Int32) Kind {
	return Kind{
		Name: "echo",
		Build: func(spec agent.Tool, deps Deps) (Tool, error) {
			if deps.Logger == nil || deps.Secrets == nil || deps.Now == nil {
				return nil, errors.New("deps without defaults")
			}
			if string(spec.Config) == `"bad"` {
				return nil, agent.Errorf(agent.CodeInvalid, "echo config: bad")
			}
			builds.Add(1)
			return toolFunc(func(_ context.Context, args json.RawMessage) (Output, error) {
				return Output{Text: string(spec.Config) + " " + string(args)}, nil
			}), nil
		},
	}
}

func TestNewRegistryRejectsBadKinds(t *testing.T) {
	build := func(agent.Tool, Deps) (Tool, error) { return nil, nil }
	tests := []struct {
		name  string
		kinds []Kind
		want  string
	}{
		{"duplicate", []Kind{{Name: "a", Build: build}, {Name: "a", Build: build}}, `tool kind "a" is registered twice`},
		{"duplicate builtin", append(Builtin(), Calculator()), `tool kind "calculator" is registered twice`},
		{"no name", []Kind{{Build: build}}, `tool kind 0: name is required`},
		{"no build", []Kind{{Name: "a"}}, `tool kind "a": Build is required`},
		{"parameters not an object", []Kind{{Name: "a", Build: build, Parameters: json.RawMessage(`[]`)}}, `tool kind "a": parameters must be a JSON object schema`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewRegistry(Deps{}, tt.kinds...)
			require.EqualError(t, err, tt.want)
		})
	}
}

func TestRegistryKinds(t *testing.T) {
	var builds atomic.Int32
	r, err := NewRegistry(Deps{}, echoKind(&builds), Calculator())
	require.NoError(t, err)
	var names []string
	for _, k := range r.Kinds() {
		names = append(names, k.Name)
	}
	require.Equal(t, []string{"calculator", "echo"}, names)

	k, ok := r.Kind("calculator")
	require.True(t, ok)
	require.True(t, kind.IsJSONObject(k.Parameters))
	require.NotEmpty(t, k.Description)
	_, ok = r.Kind("nope")
	require.False(t, ok)
}

func TestExecuteUnknownKind(t *testing.T) {
	r := newTestRegistry(t)
	_, err := r.Execute(context.Background(), agent.Tool{Name: "refund", Kind: "http"}, Call{Args: json.RawMessage(`{}`)})
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "code of %v", err)
	require.EqualError(t, err, `refund: unknown tool kind "http"`)
}

func TestExecuteCachesBuiltTools(t *testing.T) {
	var builds atomic.Int32
	r, err := NewRegistry(Deps{}, echoKind(&builds))
	require.NoError(t, err)
	spec := agent.Tool{Name: "e", Kind: "echo", Config: json.RawMessage(`{"n":1}`)}

	// Each goroutine keeps its outcome; the test's goroutine checks them
	// (require must not run on another goroutine).
	const callers = 16
	outs := make([]Output, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			outs[i], errs[i] = r.Execute(context.Background(), spec, Call{Args: json.RawMessage(` {"x": 1} `)})
		})
	}
	wg.Wait()
	for i := range callers {
		require.NoError(t, errs[i])
		require.Equal(t, `{"n":1} {"x": 1}`, outs[i].Text)
	}
	require.Equal(t, int32(1), builds.Load(), "one build for concurrent calls of one spec")

	// Any change of the spec builds a new tool.
	for _, changed := range []agent.Tool{
		{Name: "e", Kind: "echo", Config: json.RawMessage(`{"n":2}`)},
		{Name: "e2", Kind: "echo", Config: json.RawMessage(`{"n":1}`)},
		{Name: "e", Kind: "echo", Config: json.RawMessage(`{"n":1}`), Approval: agent.ApprovalAlways},
		// Fields must not run into each other: "ab"+"" differs from "a"+"b".
		{Name: "e", Kind: "echo", Description: "ab"},
		{Name: "e", Kind: "echo", Description: "a", Parameters: json.RawMessage("b")},
	} {
		_, err := r.Execute(context.Background(), changed, Call{Args: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	require.Equal(t, int32(6), builds.Load())
	_, err = r.Execute(context.Background(), spec, Call{Args: json.RawMessage(`{}`)})
	require.NoError(t, err)
	require.Equal(t, int32(6), builds.Load())
}

func TestExecuteBadConfigIsNotCached(t *testing.T) {
	var builds atomic.Int32
	r, err := NewRegistry(Deps{}, echoKind(&builds))
	require.NoError(t, err)
	spec := agent.Tool{Name: "e", Kind: "echo", Config: json.RawMessage(`"bad"`)}
	for range 2 {
		_, err := r.Execute(context.Background(), spec, Call{Args: json.RawMessage(`{}`)})
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "code of %v", err)
		require.EqualError(t, err, "e: configure: echo config: bad")
	}
	r.mu.Lock()
	require.Empty(t, r.built)
	r.mu.Unlock()
}

func TestExecuteToolFailure(t *testing.T) {
	boom := errors.New("connection refused")
	failing := Kind{Name: "failing", Build: func(agent.Tool, Deps) (Tool, error) {
		return toolFunc(func(context.Context, json.RawMessage) (Output, error) { return Output{}, boom }), nil
	}}
	r, err := NewRegistry(Deps{}, failing)
	require.NoError(t, err)
	_, err = r.Execute(context.Background(), agent.Tool{Name: "f", Kind: "failing"}, Call{Args: json.RawMessage(`{}`)})
	require.ErrorIs(t, err, boom)
	require.Equal(t, agent.CodeInternal, agent.ErrorCode(err), "a tool's own failure is not the model's fault")
	require.EqualError(t, err, "f: connection refused")
}

func TestExecuteCanceled(t *testing.T) {
	r := newTestRegistry(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := r.Execute(ctx, calcSpec(""), Call{Args: json.RawMessage(exprArgs("1+1"))})
	require.ErrorIs(t, err, context.Canceled)
}

func TestExecuteCacheIsBounded(t *testing.T) {
	var builds atomic.Int32
	r, err := NewRegistry(Deps{}, echoKind(&builds))
	require.NoError(t, err)
	for i := range maxBuilt + 10 {
		_, err := r.Execute(context.Background(), agent.Tool{Name: "e", Kind: "echo", Config: json.RawMessage(strconv.Itoa(i))}, Call{Args: json.RawMessage(`{}`)})
		require.NoError(t, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	require.LessOrEqual(t, len(r.built), maxBuilt)
	require.Positive(t, len(r.built))
}

// leakKind builds tools that resolve env:KEY and put its value wherever
// their arguments say: the text, the data, the preview, progress, a
// custom event, the error, or the data or a custom event as a JSON
// number.
func leakKind() Kind {
	return Kind{
		Name: "leak",
		Build: func(_ agent.Tool, deps Deps) (Tool, error) {
			return toolRun(func(ctx context.Context, call Call) (Output, error) {
				v, err := deps.Secrets.Resolve(ctx, "env:KEY")
				if err != nil {
					return Output{}, err
				}
				quoted, _ := json.Marshal(v)
				call.Progress("working with " + v)
				if err := call.Emit(agent.CustomEvent{Name: "leak", Value: json.RawMessage(`{"key":` + string(quoted) + `}`)}); err != nil {
					return Output{}, err
				}
				switch string(call.Args) {
				case `{"where":"custom number"}`:
					err := call.Emit(agent.CustomEvent{Name: "n", Value: json.RawMessage(v)})
					return Output{Text: fmt.Sprint(err)}, nil
				case `{"where":"error"}`:
					return Output{}, agent.Errorf(agent.CodeInvalid, "the API said: key %s is wrong", v)
				case `{"where":"number"}`:
					return Output{Data: json.RawMessage(`{"n":` + v + `}`)}, nil
				}
				return Output{Text: "got " + v, Data: json.RawMessage(`[{"key":` + string(quoted) + `}]`),
					Preview: &agent.DataPreview{Type: agent.DataDataset, RowCount: 1, Fields: []agent.Field{{Name: v, Type: "string"}},
						Sample: []json.RawMessage{json.RawMessage(`{"key":` + string(quoted) + `}`)}}}, nil
			}), nil
		},
	}
}

// toolRun adapts a function of the whole call to Tool.
type toolRun func(ctx context.Context, call Call) (Output, error)

func (f toolRun) Run(ctx context.Context, call Call) (Output, error) { return f(ctx, call) }

// TestExecuteCleansSecrets: whatever a tool does with a secret it
// resolved, the registry hands on its placeholder instead: in the text,
// the data, the preview, progress and the error.
func TestExecuteCleansSecrets(t *testing.T) {
	for _, tt := range []struct{ name, value string }{
		{"a key", "sk-live-0123456789"},
		{"a key with what JSON escapes", `sk"live\0123/é`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"KEY": tt.value}
			r, err := NewRegistry(Deps{Secrets: secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })}, leakKind())
			require.NoError(t, err)
			var progress []string
			var custom []string
			call := func(args string) (Output, error) {
				return r.Execute(context.Background(), agent.Tool{Name: "leaky", Kind: "leak"},
					Call{Args: json.RawMessage(args), Progress: func(m string) { progress = append(progress, m) },
						Emit: func(e agent.CustomEvent) error { custom = append(custom, string(e.Value)); return nil }})
			}
			out, err := call(`{"where":"output"}`)
			require.NoError(t, err)
			require.Equal(t, "got [secret env:KEY]", out.Text)
			require.JSONEq(t, `[{"key":"[secret env:KEY]"}]`, string(out.Data))
			require.Equal(t, "[secret env:KEY]", out.Preview.Fields[0].Name)
			require.JSONEq(t, `{"key":"[secret env:KEY]"}`, string(out.Preview.Sample[0]))
			require.Equal(t, []string{"working with [secret env:KEY]"}, progress)
			require.Len(t, custom, 1)
			require.JSONEq(t, `{"key":"[secret env:KEY]"}`, custom[0])

			_, err = call(`{"where":"error"}`)
			require.EqualError(t, err, "leaky: the API said: key [secret env:KEY] is wrong")
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "the code is kept")
		})
	}

	// A value outside a JSON string cannot be replaced: the call fails.
	env := map[string]string{"KEY": "1234567890"}
	r, err := NewRegistry(Deps{Secrets: secrets.NewEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })}, leakKind())
	require.NoError(t, err)
	_, err = r.Execute(context.Background(), agent.Tool{Name: "leaky", Kind: "leak"}, Call{Args: json.RawMessage(`{"where":"number"}`)})
	require.ErrorContains(t, err, "leaky: the tool's data holds a secret's value outside a JSON string")
	require.NotContains(t, err.Error(), "1234567890")
	// Nor in a custom event's value: the event is not sent, and the tool
	// is told why.
	var sent []string
	out, err := r.Execute(context.Background(), agent.Tool{Name: "leaky", Kind: "leak"}, Call{Args: json.RawMessage(`{"where":"custom number"}`),
		Emit: func(e agent.CustomEvent) error { sent = append(sent, string(e.Value)); return nil }})
	require.NoError(t, err)
	require.Equal(t, `custom "n" holds a secret's value where it cannot be replaced: the event is not sent`, out.Text)
	require.Equal(t, []string{`{"key":"[secret env:KEY]"}`}, sent)

	// A value too short to be found is refused, not used.
	env["KEY"] = "4711"
	_, err = r.Execute(context.Background(), agent.Tool{Name: "leaky", Kind: "leak"}, Call{Args: json.RawMessage(`{"where":"output"}`)})
	require.ErrorIs(t, err, secrets.ErrTooShort)
	require.NotContains(t, err.Error(), "4711")
}

// TestExecuteResolvesForTheCallsTenant: a call resolves its secrets for
// its own tenant, so a resolver scoped by the operator's grants hands a
// tenant only what it was granted, whatever its catalog names.
func TestExecuteResolvesForTheCallsTenant(t *testing.T) {
	env := secrets.NewEnv(func(k string) (string, bool) {
		v, ok := map[string]string{"KEY": "sk-demo-0123456789", "DATABASE_URL": "postgres://u:pw@h/db"}[k]
		return v, ok
	})
	grants, err := secrets.ParseGrants("demo=env:KEY")
	require.NoError(t, err)
	r, err := NewRegistry(Deps{Secrets: secrets.Scoped(env, grants)}, leakKind())
	require.NoError(t, err)
	call := func(tenant string) (Output, error) {
		return r.Execute(context.Background(), agent.Tool{Name: "leaky", Kind: "leak"}, Call{Args: json.RawMessage(`{"where":"output"}`), TenantID: tenant})
	}
	out, err := call("demo")
	require.NoError(t, err)
	require.Equal(t, "got [secret env:KEY]", out.Text)
	_, err = call("acme")
	require.ErrorContains(t, err, `secret env:KEY is not one tenant "acme" may name`)
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "a tool error the model reads, not a failure to retry")
	require.NotContains(t, err.Error(), "sk-demo")
}

// TestCallDefaultsCheckCustomEvents: a call made without a turn (a test,
// a catalog check) still refuses custom events not of their shape, so a
// tool's mistake shows wherever it runs.
func TestCallDefaultsCheckCustomEvents(t *testing.T) {
	emit := Call{}.WithDefaults().Emit
	require.NoError(t, emit(agent.CustomEvent{Name: "chart", ID: "c1", Value: json.RawMessage(`{"points":[1,2]}`)}))
	for _, e := range []agent.CustomEvent{
		{Name: "chart"},
		{Name: "chart", Value: json.RawMessage(`{"points":`)},
		{Name: "a chart", Value: json.RawMessage(`1`)},
		{Name: "chart", ID: "with space", Value: json.RawMessage(`1`)},
	} {
		err := emit(e)
		require.Error(t, err, "%+v", e)
		require.True(t, agent.IsCode(err, agent.CodeInvalid))
	}
}
