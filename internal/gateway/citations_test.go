package gateway

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/agentflow/agentflow/internal/agent"
)

// TestResultCitations: a result's citations reach the gRPC answer, and
// its JSON form (the HTTP API's) names them as the domain does.
func TestResultCitations(t *testing.T) {
	out := toPBResult(agent.TurnResult{Status: agent.StatusCompleted, Output: "14 days [1].",
		Citations: []agent.Citation{{ChunkID: "doc_ab#2", DocumentID: "doc_ab", DocumentTitle: "Refund policy", Position: 2}}}, "")
	require.Len(t, out.GetCitations(), 1)
	c := out.GetCitations()[0]
	require.Equal(t, []any{"doc_ab#2", "doc_ab", "Refund policy", int32(2)}, []any{c.GetChunkId(), c.GetDocumentId(), c.GetDocumentTitle(), c.GetPosition()})
	raw, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(out)
	require.NoError(t, err)
	var got struct {
		Citations json.RawMessage `json:"citations"`
	}
	require.NoError(t, json.Unmarshal(raw, &got))
	require.JSONEq(t, `[{"chunk_id":"doc_ab#2","document_id":"doc_ab","document_title":"Refund policy","position":2}]`, string(got.Citations))
}
