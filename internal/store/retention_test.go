package store_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/store"
)

const day = 24 * time.Hour

// sweepAll runs a kind's batches for a tenant until one is not full, and
// adds up what they deleted.
func sweepAll(t *testing.T, s *store.Store, runID, tenant string, kind store.RetentionKind, before time.Time, limit int) store.Swept {
	t.Helper()
	var total store.Swept
	for {
		got, err := s.Sweep(t.Context(), store.Sweep{RunID: runID, TenantID: tenant, Kind: kind, Before: before, Limit: limit})
		require.NoError(t, err)
		total.Deleted += got.Deleted
		total.Freed += got.Freed
		total.Objects += got.Objects
		total.Statements += got.Statements
		if !got.More {
			return total
		}
	}
}

// age moves rows' created_at back.
func age(t *testing.T, s *store.Store, query string, args ...any) {
	t.Helper()
	_, err := s.Pool().Exec(t.Context(), query, args...)
	require.NoError(t, err)
}

func sumOf(data []byte) string {
	h := sha256.Sum256(data)
	return hex.EncodeToString(h[:])
}

// addResult stores a result row of a tenant naming a blob (data_ref) or
// none.
func addResult(t *testing.T, s *store.Store, tenant, job, dataRef string) {
	t.Helper()
	age(t, s, `INSERT INTO agent_results (tenant_id, job_id, result_data, status, data_ref) VALUES ($1, $2, '{}', 'completed', $3)`, tenant, job, dataRef)
}

func addTurn(t *testing.T, s *store.Store, tenant, job string) {
	t.Helper()
	age(t, s, `INSERT INTO turns (tenant_id, job_id, workflow_id, agent_id, agent_version, request) VALUES ($1, $2, 'w', 'a', 1, '{}')`, tenant, job)
	require.NoError(t, s.PutStep(t.Context(), tenant, job, 0, agent.Message{Role: agent.RoleUser, Content: "secret prompt"}))
}

func TestRetentionSweep(t *testing.T) {
	s, objects, _ := openObjects(t)
	ctx := t.Context()
	old := `now() - interval '3 days'`

	// Blobs: one large (in the object store) and one small owned by acme
	// alone, both old; one old for acme that globex owns too; one old that
	// a live result of acme names; one young.
	large := randomBytes(10, minObject+1)
	small, shared, named, young := []byte("small"), []byte("shared"), []byte("named"), []byte("young")
	for _, b := range [][]byte{large, small, shared, named, young} {
		_, err := s.PutTenantBlob(ctx, "acme", b, "text/plain")
		require.NoError(t, err)
	}
	_, err := s.PutTenantBlob(ctx, "globex", shared, "text/plain")
	require.NoError(t, err)
	age(t, s, `UPDATE blob_owners SET created_at = `+old+` WHERE tenant_id = 'acme' AND sha256 <> $1`, sumOf(young))
	age(t, s, `UPDATE blob_owners SET created_at = `+old+` WHERE tenant_id = 'globex'`)

	// Results: two old of acme (one naming a blob, kept alive by its
	// young twin below), one young; one old of globex.
	addResult(t, s, "acme", "old-1", "")
	addResult(t, s, "acme", "old-2", "")
	addResult(t, s, "acme", "live", agent.CASRefPrefix+sumOf(named))
	addResult(t, s, "globex", "old-g", "")
	age(t, s, `UPDATE agent_results SET created_at = `+old+` WHERE job_id IN ('old-1', 'old-2', 'old-g')`)

	// Transcripts: an old and a young turn of acme, an old one of globex;
	// a session with two old messages and a young one, and a summary.
	for _, tj := range [][2]string{{"acme", "t-old"}, {"acme", "t-young"}, {"globex", "t-old"}} {
		addTurn(t, s, tj[0], tj[1])
	}
	age(t, s, `UPDATE turns SET created_at = `+old+` WHERE job_id = 't-old'`)
	msg := func(text string) []agent.Message { return []agent.Message{{Role: agent.RoleUser, Content: text}} }
	require.NoError(t, s.AppendSession(ctx, "acme", "s1", "j1", msg("one")))
	require.NoError(t, s.AppendSession(ctx, "acme", "s1", "j2", msg("two")))
	age(t, s, `UPDATE session_messages SET created_at = `+old)
	require.NoError(t, s.AppendSession(ctx, "acme", "s1", "j3", msg("three")))
	age(t, s, `UPDATE sessions SET summary = 'one and two', summary_seq = 2`)

	before := time.Now().Add(-day)
	run := "retention/test"
	res := sweepAll(t, s, run, "acme", store.RetainResults, before, 1)
	require.Equal(t, 2, res.Deleted)
	blobs := sweepAll(t, s, run, "acme", store.RetainBlobs, before, 2)
	require.Equal(t, 3, blobs.Deleted, "large, small and shared lose acme; named is kept by a live result")
	require.Equal(t, 2, blobs.Freed, "large and small go whole; globex keeps shared")
	require.Equal(t, 1, blobs.Objects)
	tr := sweepAll(t, s, run, "acme", store.RetainTranscripts, before, 1000)
	require.Equal(t, 3, tr.Deleted, "one turn, two messages")

	// acme's expired rows are gone; the rest stay.
	_, _, err = s.TenantBlob(ctx, "acme", casRef(large))
	requireCode(t, err, agent.CodeNotFound)
	_, err = objects.Stat(ctx, objstore.Key(sumOf(large)))
	require.ErrorIs(t, err, objstore.ErrNotFound, "the object went with its last owner")
	require.Zero(t, count(t, s, `SELECT count(*) FROM cas_blobs WHERE sha256 = ANY($1)`, []string{sumOf(large), sumOf(small)}))
	for _, b := range [][]byte{named, young} {
		_, _, err := s.TenantBlob(ctx, "acme", casRef(b))
		require.NoError(t, err)
	}
	got, _, err := s.TenantBlob(ctx, "globex", casRef(shared))
	require.NoError(t, err)
	require.Equal(t, shared, got)
	_, _, err = s.TenantBlob(ctx, "acme", casRef(shared))
	requireCode(t, err, agent.CodeNotFound)
	require.Equal(t, 2, count(t, s, `SELECT count(*) FROM agent_results`), "acme's live and globex's old")
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM agent_results WHERE tenant_id = 'globex'`))
	require.Equal(t, 2, count(t, s, `SELECT count(*) FROM turns`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM turn_steps WHERE tenant_id = 'acme'`), "the old turn's steps went with it")
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM turns WHERE tenant_id = 'globex'`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM session_messages`))
	require.Equal(t, 1, count(t, s, `SELECT count(*) FROM sessions WHERE summary = '' AND summary_seq = 0`), "the summary of deleted messages goes too")

	// The audit log says exactly that, batch by batch.
	log, err := s.AuditLog(ctx, store.AuditQuery{RunID: run})
	require.NoError(t, err)
	refs := map[store.RetentionKind][]string{}
	var freed []string
	for _, e := range log {
		require.Equal(t, "acme", e.TenantID)
		require.Len(t, e.Refs, e.Count)
		h := sha256.Sum256([]byte(strings.Join(e.Refs, "\n")))
		require.Equal(t, hex.EncodeToString(h[:]), e.Digest)
		refs[e.Kind] = append(refs[e.Kind], e.Refs...)
		freed = append(freed, e.Freed...)
	}
	for _, r := range refs {
		sort.Strings(r)
	}
	sort.Strings(freed)
	require.Equal(t, []string{"old-1", "old-2"}, refs[store.RetainResults])
	wantBlobs := []string{sumOf(large), sumOf(small), sumOf(shared)}
	sort.Strings(wantBlobs)
	require.Equal(t, wantBlobs, refs[store.RetainBlobs])
	wantFreed := []string{sumOf(large), sumOf(small)}
	sort.Strings(wantFreed)
	require.Equal(t, wantFreed, freed)
	require.Equal(t, []string{"message:s1/1", "message:s1/2", "turn:t-old"}, refs[store.RetainTranscripts])

	// A second sweep (a retried activity) deletes and records nothing.
	for _, k := range store.RetentionKinds {
		again := sweepAll(t, s, run, "acme", k, before, 1000)
		require.Zero(t, again.Deleted, k)
	}
	again, err := s.AuditLog(ctx, store.AuditQuery{RunID: run})
	require.NoError(t, err)
	require.Len(t, again, len(log))
}

// TestRetentionFreesResultPayload: a result's payload blob, which no
// tenant owns, goes with the result.
func TestRetentionFreesResultPayload(t *testing.T) {
	s := open(t, store.Options{ResultInlineLimit: 10})
	ctx := t.Context()
	req := agent.TurnRequest{Version: "1.0", JobID: "j", TenantID: "acme", Prompt: "p"}
	_, err := s.SaveResult(ctx, "acme", "turn/acme/j", agent.TurnResult{Version: "1.0", JobID: "j", Status: agent.StatusCompleted,
		Output: strings.Repeat("a long answer ", 10)}, req)
	require.NoError(t, err)
	var sum string
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT cas_id FROM agent_results`).Scan(&sum))
	age(t, s, `UPDATE agent_results SET created_at = now() - interval '2 days'`)

	got := sweepAll(t, s, "r", "acme", store.RetainResults, time.Now().Add(-day), 100)
	require.Equal(t, store.Swept{Deleted: 1, Freed: 1, Statements: got.Statements}, got)
	require.Zero(t, count(t, s, `SELECT count(*) FROM cas_blobs WHERE sha256 = $1`, sum))
}

// stallPuts is an S3 endpoint in front of another that, once armed,
// holds the answer of the next PUT after the object is stored, until
// released: a writer that has uploaded its object and not yet added its
// row.
type stallPuts struct {
	armed    atomic.Bool
	uploaded chan struct{}
	release  chan struct{}
	proxy    *httputil.ReverseProxy
}

func (p *stallPuts) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut || !p.armed.CompareAndSwap(true, false) {
		p.proxy.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	p.proxy.ServeHTTP(rec, r)
	close(p.uploaded)
	<-p.release
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// TestRetentionWriterRace runs a sweep and a writer of the same bytes in
// the order that would lose them without the hash's lock: the writer has
// uploaded the object (which exists already, for a tenant whose
// ownership has expired) and not yet added its row when the sweep frees
// the blob. The sweep waits for the writer, and the blob stays whole.
func TestRetentionWriterRace(t *testing.T) {
	cfg := devtest.ObjectStore(t)
	upstream, err := url.Parse(cfg.Endpoint)
	require.NoError(t, err)
	stall := &stallPuts{uploaded: make(chan struct{}), release: make(chan struct{}), proxy: httputil.NewSingleHostReverseProxy(upstream)}
	front := httptest.NewServer(stall)
	t.Cleanup(front.Close)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(stall.release) }) }
	t.Cleanup(release) // before front.Close, should the test fail while a PUT is held
	cfg.Endpoint, cfg.MinBlobBytes = front.URL, minObject
	objects, err := objstore.New(t.Context(), cfg)
	require.NoError(t, err)
	s := open(t, store.Options{BlobChunkSize: objectChunk, Objects: objects})
	ctx := t.Context()

	data := randomBytes(11, minObject+5)
	_, err = s.WriteTenantBlob(ctx, "acme", bytes.NewReader(data), "", 0)
	require.NoError(t, err)
	age(t, s, `UPDATE blob_owners SET created_at = now() - interval '2 days'`)

	stall.armed.Store(true)
	wrote := make(chan error, 1)
	go func() {
		_, err := s.WriteTenantBlob(ctx, "globex", bytes.NewReader(data), "", 0)
		wrote <- err
	}()
	<-stall.uploaded

	type result struct {
		swept store.Swept
		err   error
	}
	swept := make(chan result, 1)
	go func() {
		got, err := s.Sweep(ctx, store.Sweep{RunID: "r", TenantID: "acme", Kind: store.RetainBlobs, Before: time.Now().Add(-day)})
		swept <- result{got, err}
	}()
	// The sweep waits for the writer that holds the hash; without the
	// lock it deletes the row and the object now, and the writer then
	// adds a row for an object that is gone.
	var early bool
	select {
	case r := <-swept:
		early = true
		swept <- r
	case <-time.After(500 * time.Millisecond):
	}
	release()
	require.NoError(t, <-wrote)
	r := <-swept
	require.NoError(t, r.err)

	read, _, err := s.TenantBlob(ctx, "globex", casRef(data))
	require.NoError(t, err, "the blob a writer stored during the sweep is whole")
	require.Equal(t, data, read)
	require.False(t, early, "the sweep waited for the writer")
	require.Equal(t, 1, r.swept.Deleted, "acme's ownership expired")
	require.Zero(t, r.swept.Freed, "globex owns the blob now")
	_, _, err = s.TenantBlob(ctx, "acme", casRef(data))
	requireCode(t, err, agent.CodeNotFound)
}

func TestRetentionCatalogNarrows(t *testing.T) {
	s := open(t, store.Options{Retention: agent.Retention{Results: 30 * day, Transcripts: 7 * day}})
	ctx := t.Context()
	apply := func(r *agent.Retention) error {
		_, err := s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "acme", Retention: r}}}, false)
		return err
	}
	err := apply(&agent.Retention{Results: 60 * day})
	requireCode(t, err, agent.CodeInvalid)
	require.ErrorContains(t, err, "retention.results: 60d is longer than the operator's 30d")
	err = apply(&agent.Retention{Results: 10 * day, Transcripts: 36 * time.Hour * 5})
	requireCode(t, err, agent.CodeInvalid)
	require.ErrorContains(t, err, "retention.transcripts: 180h0m0s is longer than the operator's 7d")

	require.NoError(t, apply(&agent.Retention{Results: 10 * day, Transcripts: 7 * day, Blobs: 90 * day}))
	require.NoError(t, apply(nil)) // a catalog without the block keeps the tenant's
	_, err = s.ApplyCatalog(ctx, agent.Catalog{Tenants: []agent.TenantCatalog{{TenantID: "globex"}}}, false)
	require.NoError(t, err)
	plan, err := s.RetentionPlan(ctx)
	require.NoError(t, err)
	require.Equal(t, []store.TenantRetention{
		{TenantID: "acme", Retention: agent.Retention{Results: 10 * day, Transcripts: 7 * day, Blobs: 90 * day}},
		{TenantID: "globex", Retention: agent.Retention{Results: 30 * day, Transcripts: 7 * day}},
	}, plan)

	// A TTL left out is the operator's; an empty block is all the operator's.
	require.NoError(t, apply(&agent.Retention{Results: day}))
	plan, err = s.RetentionPlan(ctx)
	require.NoError(t, err)
	require.Equal(t, agent.Retention{Results: day, Transcripts: 7 * day}, plan[0].Retention)
	require.NoError(t, apply(&agent.Retention{}))
	require.Equal(t, 0, count(t, s, `SELECT count(*) FROM tenants WHERE retention IS NOT NULL`))
}
