package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/governor"
	"github.com/agentflow/agentflow/internal/knowledge"
	"github.com/agentflow/agentflow/internal/metered"
	"github.com/agentflow/agentflow/internal/store"
)

const embedModel = "openai:text-embedding-3-small"

// knowledgeHarness is a harness whose activities ingest into a real
// knowledge store with the scripted model's embeddings behind gates
// (metered.Embedder, as the worker wires it).
func knowledgeHarness(t *testing.T, gov *governor.Governor) (*harness, *knowledge.Store, *metered.Embedder) {
	t.Helper()
	var ks *knowledge.Store
	var emb *metered.Embedder
	h := newHarness(t, modelScript, func(d *Deps) {
		var err error
		ks, err = knowledge.New(t.Context(), d.Store.Pool(), knowledge.Options{})
		require.NoError(t, err)
		emb = &metered.Embedder{Gates: &metered.Gates{Store: d.Store, Governor: gov, Logger: d.Logger}, Inner: d.Model.(knowledge.Embedder)}
		d.Knowledge, d.Embedder = ks, emb
	})
	_, err := ks.CreateCollection(t.Context(), agent.Collection{Tenant: "demo", Name: "docs", EmbeddingModel: embedModel})
	require.NoError(t, err)
	return h, ks, emb
}

// ingestPage stores a page of three documents and returns its input.
func ingestPage(t *testing.T, h *harness, batch string) contract.IngestPageInput {
	t.Helper()
	var docs []contract.IngestDocument
	for i := range 3 {
		docs = append(docs, contract.IngestDocument{Title: fmt.Sprintf("doc %d", i),
			Text: fmt.Sprintf("Document %d of batch %s says the harbour opens at %d in the morning.", i, batch, 5+i)})
	}
	data, err := json.Marshal(contract.IngestPageManifest{Documents: docs})
	require.NoError(t, err)
	ref, err := h.store.PutTenantBlob(t.Context(), "demo", data, "application/json")
	require.NoError(t, err)
	return contract.IngestPageInput{TenantID: "demo", Collection: "docs", BatchID: batch, Ref: ref}
}

// TestIngestEmbeddingsOnTheLedger: an ingest's embeddings are the
// tenant's usage, of kind embedding, with the tokens the provider
// reported; a second attempt of the page that embeds the same documents
// again adds no second row.
func TestIngestEmbeddingsOnTheLedger(t *testing.T) {
	t.Parallel()
	h, ks, _ := knowledgeHarness(t, nil)
	in := ingestPage(t, h, "b1")
	var res contract.IngestPageResult
	h.execute(t, contract.IngestPage, in, &res)
	require.Equal(t, 3, res.Stored)
	require.Positive(t, res.Tokens)

	rows, err := h.store.JobUsage(t.Context(), "demo", "ingest:b1:0:0")
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, store.KindEmbedding, rows[0].Kind)
	require.Equal(t, embedModel, rows[0].Model)
	require.Equal(t, res.Tokens, rows[0].Usage.PromptTokens, "the tokens the scripted provider reported")

	// The attempt's write is lost (the documents are gone): the next
	// attempt embeds them again, under the same key.
	for _, id := range res.DocumentIDs {
		require.NoError(t, ks.DeleteDocument(t.Context(), "demo", "docs", id))
	}
	embedded := h.model.Embedded()
	h.execute(t, contract.IngestPage, in, &res)
	require.Greater(t, h.model.Embedded(), embedded, "the provider was called again")
	rows, err = h.store.JobUsage(t.Context(), "demo", "ingest:b1:0:0")
	require.NoError(t, err)
	require.Len(t, rows, 1, "counted once")

	report, err := h.store.UsageReport(t.Context(), "demo", time.Now().Add(-time.Hour), time.Now().Add(time.Minute), store.ByKind)
	require.NoError(t, err)
	require.Equal(t, []store.UsageRow{{Key: store.KindEmbedding, Calls: 1, InputTokens: int64(res.Tokens)}}, report)
}

// TestIngestBudgetSpent: a tenant whose budget is spent has its ingest
// refused with BudgetExceeded before anything of the page is embedded or
// stored; a prepare phase's question is refused the same way.
func TestIngestBudgetSpent(t *testing.T) {
	t.Parallel()
	h, ks, _ := knowledgeHarness(t, nil)
	budget := func(tokens int64) {
		_, err := h.applyCatalog(t.Context(), agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "demo",
			Budgets: &agent.Budgets{Day: &agent.Budget{Tokens: tokens}}}}}, false)
		require.NoError(t, err)
	}
	budget(100000)

	// The day's first ingest passes; then the budget is lowered under
	// what it spent.
	var res contract.IngestPageResult
	h.execute(t, contract.IngestPage, ingestPage(t, h, "b1"), &res)
	require.Equal(t, 3, res.Stored)
	embedded := h.model.Embedded()
	budget(5)

	_, err := h.env.ExecuteActivity(contract.IngestPage, ingestPage(t, h, "b2"))
	var app *temporal.ApplicationError
	require.True(t, errors.As(err, &app), "%v", err)
	require.Equal(t, agent.ErrTypeBudget, app.Type())
	require.True(t, app.NonRetryable())
	require.Contains(t, app.Error(), fmt.Sprintf(`tenant "demo" has used %d tokens this day (UTC); its day budget is 5 tokens`, res.Tokens))
	require.Equal(t, embedded, h.model.Embedded(), "nothing sent")
	docs, err := ks.Documents(t.Context(), "demo", "docs", "", 10)
	require.NoError(t, err)
	require.Len(t, docs, 3, "nothing of the refused page stored")

	ag := agent.Agent{ID: "assistant", Version: 1, Model: "openai:gpt-4o-mini"}
	_, err = h.acts.ask(t.Context(), ag, contract.PrepareInput{TenantID: "demo", JobID: randomJob(), Step: agent.PrepareClassify},
		ag.Model, "Classify the message.", "priced please")
	require.True(t, agent.IsCode(err, agent.CodeBudget), "%v", err)
	require.Zero(t, h.model.Served("priced"), "the model is not asked")
}

// TestEmbeddingRetryAfterHoldsTheModel: a provider that answers an
// embedding with 429 and Retry-After pauses the model's governed key, as
// a chat call's does: the next embedding waits instead of being sent.
func TestEmbeddingRetryAfterHoldsTheModel(t *testing.T) {
	t.Parallel()
	limits, err := governor.ParseLimits(embedModel + "=requests:100/1m")
	require.NoError(t, err)
	var gov *governor.Governor
	h := newHarness(t, modelScript, func(d *Deps) {
		gov, err = governor.New(governor.Options{Store: d.Store, Limits: limits, Logger: zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))})
		require.NoError(t, err)
	})
	emb := metered.Embedder{Gates: &metered.Gates{Store: h.store, Governor: gov}, Inner: h.acts.model.(knowledge.Embedder)}
	ctx := metered.WithScope(t.Context(), metered.Scope{TenantID: "demo", Key: "search:held", Channel: "http"})

	h.model.FailEmbeddings(429, 1, 30)
	_, _, err = emb.Embed(ctx, embedModel, 0, []string{"where is the harbour"})
	require.Error(t, err)
	require.Equal(t, 30*time.Second, metered.RetryAfter(err))

	sent := h.model.Embedded()
	var waits []governor.Wait
	short, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
	defer cancel()
	err = emb.Gates.Do(short, metered.Call{TenantID: "demo", Key: "search:held", Seq: 1, Kind: store.KindEmbedding, Model: embedModel, Input: 5,
		Waiting: func(w governor.Wait) { waits = append(waits, w) }}, func(ctx context.Context) (agent.Usage, error) {
		_, u, err := emb.Inner.Embed(ctx, embedModel, 0, []string{"and when does it open"})
		return u, err
	})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.NotEmpty(t, waits)
	require.Equal(t, store.GovernorPaused, waits[0].Reason)
	require.Equal(t, sent, h.model.Embedded(), "held: not sent")
}

// TestEmbedderNeedsAScope: an embedding whose context names no tenant to
// charge is refused, never sent uncounted; a search's is counted under
// its scope.
func TestEmbedderNeedsAScope(t *testing.T) {
	t.Parallel()
	h, _, emb := knowledgeHarness(t, nil)
	_, _, err := emb.Embed(t.Context(), embedModel, 0, []string{"no tenant"})
	require.True(t, agent.IsCode(err, agent.CodeInternal), "%v", err)
	require.Zero(t, h.model.Embedded())

	ctx := metered.WithScope(t.Context(), metered.Scope{TenantID: "demo", Key: "search:q1", Channel: "http"})
	_, u, err := emb.Embed(ctx, embedModel, 0, []string{"where is the harbour"})
	require.NoError(t, err)
	rows, err := h.store.JobUsage(t.Context(), "demo", "search:q1")
	require.NoError(t, err)
	require.Len(t, rows, 1)
	require.Equal(t, "http", rows[0].Channel)
	require.Equal(t, u.PromptTokens, rows[0].Usage.PromptTokens)
}
