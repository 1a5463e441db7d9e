package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// requireCode asserts err's gRPC code and that its message says want.
func requireCode(t *testing.T, err error, code codes.Code, want string) {
	t.Helper()
	require.Equal(t, code, status.Code(err), "%v", err)
	require.Contains(t, status.Convert(err).Message(), want)
}

// TestKnowledgeService: the knowledge API over gRPC, on the real stack:
// a collection created (admin only; again, the same), documents ingested by a user and
// followed to completion, searched, listed, read and deleted; the same
// documents sent again over HTTP are the same ingest (one derived id,
// whatever the door); another tenant finds nothing of it; bad input is
// InvalidArgument naming what is wrong; the memory methods answer the
// caller's own.
func TestKnowledgeService(t *testing.T) {
	ts := testserver.Start(t, testserver.Options{Script: script, Catalogs: catalogs, HTTPAPI: true,
		Tokens: map[string]string{"tok-demo": "demo:user+approver+admin:ana", "tok-other": "other:user+approver+admin", "tok-user": "demo:user"}})
	f := fixture{conn: ts.Conn, srv: ts}
	kn := pb.NewKnowledgeServiceClient(ts.Conn)
	ctx, cancel := context.WithTimeout(f.as("tok-demo"), 2*time.Minute)
	defer cancel()
	user, other := f.as("tok-user"), f.as("tok-other")

	_, err := kn.CreateCollection(user, &pb.CreateCollectionRequest{Name: "manuals", EmbeddingModel: "openai:text-embedding-3-small"})
	requireCode(t, err, codes.PermissionDenied, "CreateCollection needs the role admin")
	_, err = kn.CreateCollection(ctx, &pb.CreateCollectionRequest{Name: "Manuals!", EmbeddingModel: "openai:text-embedding-3-small"})
	requireCode(t, err, codes.InvalidArgument, `collection name "Manuals!"`)
	c, err := kn.CreateCollection(ctx, &pb.CreateCollectionRequest{Name: "manuals", Description: "how things work", EmbeddingModel: "openai:text-embedding-3-small"})
	require.NoError(t, err)
	require.Equal(t, []any{"manuals", "how things work", "openai:text-embedding-3-small"}, []any{c.GetName(), c.GetDescription(), c.GetEmbeddingModel()})
	require.False(t, c.GetCreatedAt().AsTime().IsZero())
	again, err := kn.CreateCollection(ctx, &pb.CreateCollectionRequest{Name: "manuals", EmbeddingModel: "openai:text-embedding-3-small"})
	require.NoError(t, err, "a retried create is harmless")
	require.True(t, again.GetCreatedAt().AsTime().Equal(c.GetCreatedAt().AsTime()))
	_, err = kn.CreateCollection(ctx, &pb.CreateCollectionRequest{Name: "manuals", EmbeddingModel: "openai:text-embedding-3-large"})
	require.Equal(t, codes.FailedPrecondition, status.Code(err), "%v", err)

	docs := []*pb.IngestDocument{
		{Title: "Kettle", Text: "The kettle boils a litre of water in ninety seconds.", Metadata: map[string]string{"room": "kitchen"}},
		{Title: "Lamp", ContentType: "text/markdown", Text: "# Lamp\n\nThe lamp's battery lasts forty hours."},
		{Title: "Heater", ContentType: "text/html", Text: "<p>The heater warms a room of twenty square metres.</p>"},
	}
	_, err = kn.IngestDocuments(user, &pb.IngestDocumentsRequest{Collection: "manuals", Documents: []*pb.IngestDocument{{Title: "both", Text: "x", Ref: "cas://sha256:00"}}})
	requireCode(t, err, codes.InvalidArgument, "documents[0]: give text or ref, not both")
	_, err = kn.IngestDocuments(user, &pb.IngestDocumentsRequest{Collection: "manuals"})
	requireCode(t, err, codes.InvalidArgument, "documents is empty")
	_, err = kn.IngestDocuments(user, &pb.IngestDocumentsRequest{Collection: "nowhere", Documents: docs})
	requireCode(t, err, codes.NotFound, "nowhere")
	started, err := kn.IngestDocuments(user, &pb.IngestDocumentsRequest{Collection: "manuals", Documents: docs})
	require.NoError(t, err)
	require.Equal(t, int32(3), started.GetDocuments())
	require.Equal(t, "ingest/demo/"+started.GetId(), started.GetWorkflowId())

	var st *pb.IngestStatus
	require.Eventually(t, func() bool {
		st, err = kn.GetIngest(user, &pb.GetIngestRequest{Id: started.GetId()})
		require.NoError(t, err)
		return st.GetState() != "running"
	}, time.Minute, 100*time.Millisecond)
	require.Equal(t, "completed", st.GetState(), st.GetError())
	require.Equal(t, []int32{3, 3, 3, 0}, []int32{st.GetDocuments(), st.GetDone(), st.GetStored(), st.GetFailed()})

	// The same documents over HTTP are the same ingest.
	body, err := json.Marshal(map[string]any{"documents": []map[string]any{
		{"title": "Kettle", "text": docs[0].GetText(), "metadata": docs[0].GetMetadata()},
		{"title": "Lamp", "content_type": "text/markdown", "text": docs[1].GetText()},
		{"title": "Heater", "content_type": "text/html", "text": docs[2].GetText()},
	}})
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(ctx, "POST", "http://"+ts.HTTPAPIAddr()+"/v1/collections/manuals/documents", strings.NewReader(string(body)))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok-user")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	var viaHTTP struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&viaHTTP))
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, started.GetId(), viaHTTP.ID)

	_, err = kn.SearchCollection(user, &pb.SearchCollectionRequest{Collection: "manuals", Query: "battery", Mode: "fuzzy"})
	requireCode(t, err, codes.InvalidArgument, `mode "fuzzy": want hybrid, text or vector`)
	found, err := kn.SearchCollection(user, &pb.SearchCollectionRequest{Collection: "manuals", Query: "How long does the lamp's battery last?", TopK: 2})
	require.NoError(t, err)
	require.NotEmpty(t, found.GetHits())
	top := found.GetHits()[0]
	require.Equal(t, "Lamp", top.GetDocumentTitle())
	require.Contains(t, top.GetText(), "forty hours")
	require.Equal(t, top.GetDocumentId()+"#0", top.GetChunkId())
	require.Positive(t, found.GetPromptTokens())
	filtered, err := kn.SearchCollection(user, &pb.SearchCollectionRequest{Collection: "manuals", Query: "water", Mode: "text", Filter: map[string]string{"room": "kitchen"}})
	require.NoError(t, err)
	require.Len(t, filtered.GetHits(), 1)
	require.Equal(t, "Kettle", filtered.GetHits()[0].GetDocumentTitle())

	list, err := kn.ListDocuments(user, &pb.ListDocumentsRequest{Collection: "manuals", Limit: 2})
	require.NoError(t, err)
	require.Len(t, list.GetDocuments(), 2)
	require.NotEmpty(t, list.GetNextAfter())
	rest, err := kn.ListDocuments(user, &pb.ListDocumentsRequest{Collection: "manuals", After: list.GetNextAfter()})
	require.NoError(t, err)
	require.Len(t, rest.GetDocuments(), 1)
	require.Empty(t, rest.GetNextAfter())
	_, err = kn.ListDocuments(user, &pb.ListDocumentsRequest{Collection: "manuals", Limit: 5000})
	requireCode(t, err, codes.InvalidArgument, "limit 5000")
	d, err := kn.GetDocument(user, &pb.GetDocumentRequest{Collection: "manuals", Id: top.GetDocumentId()})
	require.NoError(t, err)
	require.Equal(t, []any{"Lamp", int32(1)}, []any{d.GetTitle(), d.GetChunks()})
	require.True(t, strings.HasPrefix(d.GetContentHash(), "sha256:"))

	// Another tenant finds nothing: not the collection, its documents,
	// its search or the ingest.
	_, err = kn.GetCollection(other, &pb.GetCollectionRequest{Name: "manuals"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = kn.SearchCollection(other, &pb.SearchCollectionRequest{Collection: "manuals", Query: "lamp"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = kn.GetDocument(other, &pb.GetDocumentRequest{Collection: "manuals", Id: top.GetDocumentId()})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = kn.IngestDocuments(other, &pb.IngestDocumentsRequest{Collection: "manuals", Documents: docs})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = kn.GetIngest(other, &pb.GetIngestRequest{Id: started.GetId()})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	_, err = kn.DeleteCollection(other, &pb.DeleteCollectionRequest{Name: "manuals"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	mine, err := kn.ListCollections(other, &pb.ListCollectionsRequest{})
	require.NoError(t, err)
	require.Empty(t, mine.GetCollections())

	_, err = kn.DeleteDocument(user, &pb.DeleteDocumentRequest{Collection: "manuals", Id: top.GetDocumentId()})
	require.NoError(t, err)
	_, err = kn.GetDocument(user, &pb.GetDocumentRequest{Collection: "manuals", Id: top.GetDocumentId()})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)
	all, err := kn.ListCollections(user, &pb.ListCollectionsRequest{})
	require.NoError(t, err)
	require.Len(t, all.GetCollections(), 1)

	_, err = kn.DeleteCollection(user, &pb.DeleteCollectionRequest{Name: "manuals"})
	requireCode(t, err, codes.PermissionDenied, "DeleteCollection needs the role admin")
	_, err = kn.DeleteCollection(ctx, &pb.DeleteCollectionRequest{Name: "manuals"})
	require.NoError(t, err)
	_, err = kn.GetCollection(ctx, &pb.GetCollectionRequest{Name: "manuals"})
	require.Equal(t, codes.NotFound, status.Code(err), "%v", err)

	// Memories: the caller's own; another user's needs the admin role.
	mems, err := kn.ListMemories(user, &pb.ListMemoriesRequest{})
	require.NoError(t, err)
	require.Empty(t, mems.GetMemories())
	_, err = kn.ListMemories(user, &pb.ListMemoriesRequest{Limit: 5000})
	requireCode(t, err, codes.InvalidArgument, "limit 5000")
	_, err = kn.EraseMemories(user, &pb.EraseMemoriesRequest{Subject: "bob"})
	requireCode(t, err, codes.PermissionDenied, "needs the role admin")
	erased, err := kn.EraseMemories(ctx, &pb.EraseMemoriesRequest{Subject: "bob"})
	require.NoError(t, err)
	require.Zero(t, erased.GetDeleted())
}
