package tools_test

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
	"github.com/agentflow/agentflow/internal/tools"
)

// knowledgeFixture is a real knowledge store with the scripted model's
// embeddings: tenant acme's collections handbook (three documents, one of
// them in French) and blog, and tenant other's collection private.
func knowledgeFixture(t *testing.T) knowledge.Searcher {
	t.Helper()
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
	put := func(tenant, coll, title, text string, md map[string]string) {
		_, err := ks.CreateCollection(ctx, agent.Collection{Tenant: tenant, Name: coll, EmbeddingModel: "openai:text-embedding-3-small"})
		require.NoError(t, err)
		_, err = ks.Put(ctx, emb, tenant, coll, agent.Document{Title: title, Metadata: md}, text)
		require.NoError(t, err)
	}
	put("acme", "handbook", "Refund policy", "Refunds are paid within 14 days of a return. Store credit never expires.", map[string]string{"lang": "en"})
	put("acme", "handbook", "Shipping", "Parcels ship from Rotterdam every weekday; express delivery takes one day.", map[string]string{"lang": "en"})
	put("acme", "handbook", "Remboursements", "Les remboursements sont versés sous 14 jours après un retour.", map[string]string{"lang": "fr"})
	put("acme", "blog", "Launch", "We launched the green kettle in March.", nil)
	put("other", "private", "Salaries", "Refunds of salaries are secret.", nil)
	return knowledge.Searcher{Store: ks, Embedder: emb}
}

func retrieveSpec(config string) agent.Tool {
	return agent.Tool{Name: "search_docs", Kind: agent.KindRetrieve, Config: json.RawMessage(config)}
}

func TestRetrieveFindsAndCites(t *testing.T) {
	kn := knowledgeFixture(t)
	reg, err := tools.NewRegistry(tools.Deps{Knowledge: kn}, tools.Builtin()...)
	require.NoError(t, err)
	ctx := context.Background()
	spec := retrieveSpec(`{"collections":["handbook","blog"],"top_k":2,"filter":{"lang":"en"},"model_filters":["lang","team"]}`)

	out, err := reg.Execute(ctx, spec, tools.Call{TenantID: "acme", Args: json.RawMessage(`{"query":"how many days until refunds are paid"}`)})
	require.NoError(t, err)
	require.NotEmpty(t, out.Citations)
	require.LessOrEqual(t, len(out.Citations), 2)
	first := out.Citations[0]
	require.Equal(t, "Refund policy", first.DocumentTitle)
	require.Equal(t, agent.DocumentID(agent.ContentHash("Refunds are paid within 14 days of a return. Store credit never expires.")), first.DocumentID)
	require.Equal(t, agent.ChunkID(first.DocumentID, 0), first.ChunkID)
	require.Contains(t, out.Text, "[1] Refund policy (chunk "+first.ChunkID+")\nRefunds are paid within 14 days")
	require.Contains(t, out.Text, "not instructions")
	require.NotContains(t, out.Text, "Remboursements", "the config's fixed filter keeps French out")

	// The model may not override a fixed filter, nor use a key not allowed.
	out, err = reg.Execute(ctx, spec, tools.Call{TenantID: "acme", Args: json.RawMessage(`{"query":"remboursements","filter":{"lang":"fr"}}`)})
	require.NoError(t, err)
	require.NotContains(t, out.Text, "Remboursements")
	_, err = reg.Execute(ctx, spec, tools.Call{TenantID: "acme", Args: json.RawMessage(`{"query":"refunds","filter":{"author":"x"}}`)})
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.ErrorContains(t, err, `filter "author" is not allowed; the keys you may filter by: lang, team`)

	// A budget of a few tokens cuts the one chunk it keeps.
	small := retrieveSpec(`{"collections":["handbook"],"budget":5,"mode":"text"}`)
	out, err = reg.Execute(ctx, small, tools.Call{TenantID: "acme", Args: json.RawMessage(`{"query":"refunds paid"}`)})
	require.NoError(t, err)
	require.Len(t, out.Citations, 1)
	require.Contains(t, out.Text, "Refunds are paid …")

	// Another tenant calling the same spec finds no collection of that name.
	_, err = reg.Execute(ctx, spec, tools.Call{TenantID: "other", Args: json.RawMessage(`{"query":"refunds"}`)})
	require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
	require.NotContains(t, err.Error(), "Salaries")
}

func TestRetrieveBadConfig(t *testing.T) {
	kn := knowledgeFixture(t)
	reg, err := tools.NewRegistry(tools.Deps{Knowledge: kn}, tools.Builtin()...)
	require.NoError(t, err)
	kind, ok := reg.Kind(agent.KindRetrieve)
	require.True(t, ok)
	require.Empty(t, kind.Approval, "searching changes nothing: no approval by default")
	for _, tc := range []struct{ name, config, want string }{
		{"no collections", `{}`, "collections is required"},
		{"top_k 0", `{"collections":["handbook"],"top_k":0}`, "top_k 0: want 1 to 50"},
		{"top_k too large", `{"collections":["handbook"],"top_k":51}`, "top_k 51: want 1 to 50"},
		{"budget over the max", `{"collections":["handbook"],"budget":16001}`, "budget 16001: want 1 to 16000"},
		{"bad mode", `{"collections":["handbook"],"mode":"fuzzy"}`, `mode "fuzzy": want hybrid, text or vector`},
		{"bad name", `{"collections":["Hand Book"]}`, "collections[0]"},
		{"unknown field", `{"collections":["handbook"],"k":3}`, `unknown field "k"`},
		{"bad filter key", `{"collections":["handbook"],"model_filters":["a b"]}`, "model_filters[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := kind.Build(retrieveSpec(tc.config), reg.Deps())
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tc.want)
		})
	}

	// When the catalog is applied: an unknown collection, and another
	// tenant's, are both NotFound, named; the tenant's own resolve.
	env := tools.ResolveEnv{TenantID: "acme", Deps: reg.Deps()}
	ctx := context.Background()
	for _, coll := range []string{"nowhere", "private"} {
		_, err := kind.Resolve(ctx, retrieveSpec(`{"collections":["handbook","`+coll+`"]}`), env)
		require.True(t, agent.IsCode(err, agent.CodeNotFound), "%v", err)
		require.ErrorContains(t, err, `collection "`+coll+`": the tenant has no collection of that name`)
	}
	got, err := kind.Resolve(ctx, retrieveSpec(`{"collections":["handbook","blog"]}`), env)
	require.NoError(t, err)
	require.Len(t, got, 1)
}
