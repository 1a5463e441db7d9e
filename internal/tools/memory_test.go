package tools

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/llm"
	"github.com/agentflow/agentflow/internal/scripted"
	"github.com/agentflow/agentflow/internal/store"
)

// TestRememberThenRecall: what an agent remembers in one turn of a user
// it recalls in a later turn of another session of the same user; the
// scope is the turn's caller, so another user, agent or tenant recalls
// nothing, and what the arguments say cannot change it.
func TestRememberThenRecall(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, devtest.Database(t), store.Options{})
	require.NoError(t, err)
	t.Cleanup(st.Close)
	ks, err := knowledge.New(ctx, st.Pool(), knowledge.Options{})
	require.NoError(t, err)
	srv, err := scripted.Start("127.0.0.1:0", scripted.Demo(), scripted.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = srv.Close() })
	emb, err := llm.New(llm.Config{OpenAIBaseURL: srv.URL()})
	require.NoError(t, err)
	reg, err := NewRegistry(Deps{Memories: ks.Memories(emb, "openai:text-embedding-3-small")}, Remember(), Recall())
	require.NoError(t, err)

	alice := &agent.Caller{Name: "alice", Issuer: agent.IssuerStaticToken, Subject: "alice"}
	call := func(tool, tenant, agentID, job string, who *agent.Caller, args string) (Output, error) {
		return reg.Execute(ctx, agent.Tool{Name: tool, Kind: tool}, Call{
			Args: json.RawMessage(args), TenantID: tenant, JobID: job, CallID: "c1", AgentID: agentID,
			Caller: func(context.Context) (*agent.Caller, error) { return who, nil },
		}.WithDefaults())
	}

	out, err := call("remember", "acme", "assistant", "job-1", alice, `{"text":"Alice's dog is called Biscuit","tags":["pets"]}`)
	require.NoError(t, err)
	require.Equal(t, "Remembered: Alice's dog is called Biscuit", out.Text)
	out, err = call("remember", "acme", "assistant", "job-1", alice, `{"text":"Alice's dog is called Biscuit"}`)
	require.NoError(t, err, "a retried call")
	require.Contains(t, out.Text, "Already remembered")

	// A later turn, in another session, of the same user.
	out, err = call("recall", "acme", "assistant", "job-2", alice, `{"query":"what is the name of the dog?"}`)
	require.NoError(t, err)
	require.Contains(t, out.Text, "Alice's dog is called Biscuit")
	require.Contains(t, out.Text, "data, not instructions")

	for name, c := range map[string]struct {
		tenant, agentID string
		who             *agent.Caller
	}{
		"another user":   {"acme", "assistant", &agent.Caller{Name: "bob", Issuer: agent.IssuerStaticToken, Subject: "bob"}},
		"another issuer": {"acme", "assistant", &agent.Caller{Name: "alice", Issuer: "https://idp.example", Subject: "alice"}},
		"another agent":  {"acme", "ops", alice},
		"another tenant": {"globex", "assistant", alice},
	} {
		out, err := call("recall", c.tenant, c.agentID, "job-3", c.who, `{"query":"dog Biscuit"}`)
		require.NoError(t, err, name)
		require.Contains(t, out.Text, "Nothing remembered", name)
	}

	for name, c := range map[string]struct {
		tool, args string
		who        *agent.Caller
		want       string
	}{
		"no caller":        {"remember", `{"text":"x"}`, nil, "no authenticated caller"},
		"a user in args":   {"recall", `{"query":"dog","user":"bob"}`, alice, `unknown field "user"`},
		"empty text":       {"remember", `{"text":" "}`, alice, "memory text is empty"},
		"bad tag":          {"remember", `{"text":"x","tags":["a b"]}`, alice, "memory tag"},
		"empty query":      {"recall", `{"query":""}`, alice, "query is required"},
		"top_k too large":  {"recall", `{"query":"dog","top_k":51}`, alice, "top_k must be 1 to 50"},
		"not json":         {"remember", `{"text":`, alice, "arguments"},
		"text of a number": {"remember", `{"text":7}`, alice, "arguments"},
	} {
		_, err := call(c.tool, "acme", "assistant", "job-4", c.who, c.args)
		require.Error(t, err, name)
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", name, err)
		require.Contains(t, err.Error(), c.want, name)
	}
}
