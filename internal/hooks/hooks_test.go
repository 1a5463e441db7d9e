package hooks

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/agentflow/agentflow/internal/agent"
)

type key string

// recorder is a handler that records each callback it gets, and what
// the context it got carries of the handlers before it.
func recorder(t *testing.T, name string, got *[]string, refuse error) Handler {
	return Handler{
		Name: name,
		ModelStart: func(ctx context.Context, c *ModelCall) (context.Context, error) {
			*got = append(*got, name+".start")
			if refuse != nil {
				return ctx, refuse
			}
			c.Messages = append(c.Messages, agent.Message{Role: agent.RoleSystem, Content: name})
			return context.WithValue(ctx, key(name), true), nil
		},
		ModelEnd: func(ctx context.Context, _ *ModelCall, _ *ModelReply) {
			*got = append(*got, name+".end")
			require.Equal(t, true, ctx.Value(key(name)), "an end sees its own start's context")
		},
		ModelError: func(_ context.Context, _ *ModelCall, err error) { *got = append(*got, name+".error:"+err.Error()) },
		ToolStart: func(ctx context.Context, _ *ToolCall) (context.Context, error) {
			*got = append(*got, name+".tool")
			return ctx, refuse
		},
		ToolError: func(_ context.Context, _ *ToolCall, err error) { *got = append(*got, name+".toolerror") },
	}
}

func TestRegistryOrder(t *testing.T) {
	var got []string
	r := New(recorder(t, "a", &got, nil), Handler{Name: "empty"}, recorder(t, "b", &got, nil))
	c := &ModelCall{}
	ctx, err := r.ModelStart(context.Background(), c)
	require.NoError(t, err)
	require.Equal(t, true, ctx.Value(key("a")))
	require.Equal(t, true, ctx.Value(key("b")))
	require.Len(t, c.Messages, 2, "each start may change what the model reads")
	r.ModelEnd(ctx, c, &ModelReply{})
	require.Equal(t, []string{"a.start", "b.start", "b.end", "a.end"}, got, "starts in order, ends in reverse")
	require.False(t, r.Chunks())
}

func TestRegistryRefusal(t *testing.T) {
	var got []string
	r := New(recorder(t, "a", &got, nil), recorder(t, "guard", &got, Refuse("no secrets")), recorder(t, "c", &got, nil))
	_, err := r.ModelStart(context.Background(), &ModelCall{})
	var ae *agent.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, agent.CodeGuardrailTripped, ae.Code, "a refusal keeps its code")
	require.Equal(t, "no secrets", ae.Message, "a refusal reaches the caller as the hook wrote it")
	require.Equal(t, []string{"a.start", "guard.start", "a.error:" + err.Error()}, got,
		"the handlers started before see the error; those after never start")

	got = nil
	_, err = r.ToolStart(context.Background(), &ToolCall{})
	require.Error(t, err)
	require.Equal(t, []string{"a.tool", "guard.tool", "a.toolerror"}, got)

	// A failure that is not a refusal stays one the activity retries.
	r = New(Handler{Name: "audit", ToolStart: func(ctx context.Context, _ *ToolCall) (context.Context, error) {
		return ctx, errors.New("audit log unavailable")
	}})
	_, err = r.ToolStart(context.Background(), &ToolCall{})
	require.False(t, errors.As(err, &ae))
	require.ErrorContains(t, err, "hook audit: audit log unavailable")
}

func TestNilRegistry(t *testing.T) {
	var r *Registry
	ctx, err := r.ModelStart(context.Background(), &ModelCall{})
	require.NoError(t, err)
	r.ModelEnd(ctx, &ModelCall{}, &ModelReply{})
	r.ToolEnd(ctx, &ToolCall{}, &ToolResult{})
	require.False(t, r.Chunks())
}

func TestRegistryReturn(t *testing.T) {
	var got []string
	ret := func(name string, fail error) Handler {
		return Handler{
			Name: name,
			ModelReturn: func(_ context.Context, _ *ModelCall, r *ModelReply) error {
				got = append(got, name+".return:"+r.Message.Content)
				r.Message.Content += name
				return fail
			},
			ToolReturn: func(_ context.Context, _ *ToolCall, r *ToolResult) error {
				got = append(got, name+".toolreturn:"+r.Text)
				r.Text += name
				return fail
			},
			ToolRead: func(_ context.Context, _ *ToolCall, r *ToolResult) { r.Text += name },
		}
	}
	r := New(ret("a", nil), Handler{Name: "empty"}, ret("b", nil))
	reply := &ModelReply{}
	require.NoError(t, r.ModelReturn(context.Background(), &ModelCall{}, reply))
	require.Equal(t, "ba", reply.Message.Content, "returns run in reverse, each seeing what the later made of the reply")
	res := &ToolResult{}
	require.NoError(t, r.ToolReturn(context.Background(), &ToolCall{}, res))
	require.Equal(t, "ba", res.Text)
	res = &ToolResult{}
	r.ToolRead(context.Background(), &ToolCall{}, res)
	require.Equal(t, "ab", res.Text, "reads run in order")

	got = nil
	r = New(ret("a", nil), ret("check", errors.New("bad reply")))
	err := r.ModelReturn(context.Background(), &ModelCall{}, &ModelReply{})
	require.ErrorContains(t, err, "hook check: bad reply")
	require.Equal(t, []string{"check.return:"}, got, "the returns after a failed one do not run")
}

func TestNamedKeepsApplicationErrors(t *testing.T) {
	app := temporal.NewNonRetryableApplicationError("must wait", "MustWait", nil)
	r := New(Handler{Name: "governor", ModelStart: func(ctx context.Context, _ *ModelCall) (context.Context, error) { return ctx, app }})
	_, err := r.ModelStart(context.Background(), &ModelCall{})
	require.Same(t, app, err, "Temporal reads an application error's type only unwrapped")
}

func TestTurnStart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  error
		got     []string
		refused bool
	}{
		{name: "admitted", got: []string{"a", "b"}},
		{name: "refused", refuse: Refuse("not today"), got: []string{"a"}, refused: true},
		{name: "failed", refuse: errors.New("audit log unavailable"), got: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			start := func(name string, err error) Handler {
				return Handler{Name: name, TurnStart: func(_ context.Context, b *TurnBegin) error {
					require.Equal(t, "job", b.JobID)
					got = append(got, name)
					return err
				}}
			}
			r := New(start("a", tc.refuse), Handler{Name: "empty"}, start("b", nil))
			err := r.TurnStart(context.Background(), &TurnBegin{JobID: "job"})
			require.Equal(t, tc.got, got, "in order, up to the first that fails")
			switch {
			case tc.refuse == nil:
				require.NoError(t, err)
			case tc.refused:
				require.True(t, agent.IsCode(err, agent.CodeGuardrailTripped), "a refusal keeps its code: %v", err)
			default:
				require.ErrorContains(t, err, "hook a: audit log unavailable")
			}
		})
	}
	require.NoError(t, (*Registry)(nil).TurnStart(context.Background(), &TurnBegin{}))
}
