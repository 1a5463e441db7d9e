package store_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/store"
)

// TestTenantData: a tenant reads the data it stored and the data of its
// results by ref; another tenant's refs are not found.
func TestTenantData(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	rows := []byte(`[{"id":1,"price":299},{"id":2,"price":310}]`)
	ref, err := s.PutTenantBlob(ctx, "demo", rows, "application/json")
	require.NoError(t, err)
	again, err := s.PutTenantBlob(ctx, "demo", rows, "application/json")
	require.NoError(t, err)
	require.Equal(t, ref, again, "idempotent")

	data, ctype, err := s.TenantBlob(ctx, "demo", ref)
	require.NoError(t, err)
	require.Equal(t, rows, data)
	require.Equal(t, "application/json", ctype)
	_, _, err = s.TenantBlob(ctx, "acme", ref)
	requireCode(t, err, agent.CodeNotFound)
	_, err = s.Data(ctx, "acme", ref)
	requireCode(t, err, agent.CodeNotFound)
	_, _, err = s.TenantBlob(ctx, "demo", "cas://sha256:nope")
	requireCode(t, err, agent.CodeInvalid)

	// The same bytes stored by a second tenant are its own to read too.
	_, err = s.PutTenantBlob(ctx, "acme", rows, "application/json")
	require.NoError(t, err)
	_, _, err = s.TenantBlob(ctx, "acme", ref)
	require.NoError(t, err)

	// A turn's result names the data its answer rests on; reading the
	// result by ref reads that data, and a text answer reads as a string.
	withData := completed("job-data", "The cheapest is 299.")
	withData.DataRef = ref
	req := processRequest("job-data")
	req.SessionID = "s1"
	saved, err := s.SaveResult(ctx, "demo", "turn/demo/job-data", withData, req)
	require.NoError(t, err)
	require.Equal(t, ref, saved.DataRef)
	data, err = s.Data(ctx, "demo", saved.ResultRef)
	require.NoError(t, err)
	require.JSONEq(t, string(rows), string(data))
	_, err = s.Data(ctx, "acme", saved.ResultRef)
	requireCode(t, err, agent.CodeNotFound)

	text, err := s.SaveResult(ctx, "demo", "turn/demo/job-text", completed("job-text", "fifty"), processRequest("job-text"))
	require.NoError(t, err)
	data, err = s.Data(ctx, "demo", text.ResultRef)
	require.NoError(t, err)
	require.JSONEq(t, `"fifty"`, string(data))

	got, err := s.SessionData(ctx, "demo", "s1", 5)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, "job-data", got[0].JobID)
	require.Equal(t, ref, got[0].Ref)
	none, err := s.SessionData(ctx, "acme", "s1", 5)
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestToolCache(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	now := time.Now()
	_, ok, err := s.CachedTool(ctx, "demo", "k", now)
	require.NoError(t, err)
	require.False(t, ok)

	// Kept byte for byte: data read back hashes to the same ref.
	entry := `{"text": "3 rows",  "data": [{"b":1,"a":2}]}`
	require.NoError(t, s.CacheTool(ctx, "demo", "k", json.RawMessage(entry), now.Add(time.Minute)))
	got, ok, err := s.CachedTool(ctx, "demo", "k", now)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, entry, string(got))
	_, ok, err = s.CachedTool(ctx, "acme", "k", now)
	require.NoError(t, err)
	require.False(t, ok, "per tenant")
	_, ok, err = s.CachedTool(ctx, "demo", "k", now.Add(2*time.Minute))
	require.NoError(t, err)
	require.False(t, ok, "expired")

	// A write takes away expired entries.
	require.NoError(t, s.CacheTool(ctx, "demo", "old", json.RawMessage(`{}`), now.Add(-time.Second)))
	require.NoError(t, s.CacheTool(ctx, "acme", "new", json.RawMessage(`{}`), now.Add(time.Minute)))
	var left []string
	rows, err := s.Pool().Query(ctx, `SELECT key FROM tool_cache ORDER BY key`)
	require.NoError(t, err)
	left, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"k", "new"}, left)
}

func TestTenantEgress(t *testing.T) {
	t.Parallel()
	s := open(t, store.Options{})
	ctx := t.Context()
	apply := func(tc agent.TenantCatalog) store.ApplyReport {
		t.Helper()
		tc.TenantID = "demo"
		report, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{tc}}, false)
		require.NoError(t, err)
		return report
	}
	apply(agent.TenantCatalog{})
	r, err := s.TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Empty(t, r.Egress)

	report := apply(agent.TenantCatalog{Egress: []string{"api.flights.example", "10.1.2.0/24"}, ReplaceEgress: true})
	require.Equal(t, store.ActionUpdated, report.Changes[0].Action)
	r, err = s.TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Equal(t, []string{"api.flights.example", "10.1.2.0/24"}, r.Egress)

	report = apply(agent.TenantCatalog{Egress: []string{"api.flights.example", "10.1.2.0/24"}, ReplaceEgress: true})
	require.Equal(t, store.ActionUnchanged, report.Changes[0].Action, "the same allowlist is no change")
	apply(agent.TenantCatalog{}) // no egress key: kept
	r, err = s.TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Len(t, r.Egress, 2)
	apply(agent.TenantCatalog{ReplaceEgress: true})
	r, err = s.TenantSettings(ctx, "demo")
	require.NoError(t, err)
	require.Empty(t, r.Egress, "an empty egress list clears it")
}
