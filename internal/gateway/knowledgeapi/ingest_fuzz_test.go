package knowledgeapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/knowledge"
)

// FuzzIngestRequest: an ingest's body is decoded and checked without a
// panic, and what passes has between 1 and MaxIngestDocuments documents,
// each with text or a ref of a known scheme; what fails is Invalid.
func FuzzIngestRequest(f *testing.F) {
	f.Add([]byte(`{"documents":[{"title":"a","text":"Hello."}]}`))
	f.Add([]byte(`{"id":"b1","documents":[{"ref":"cas://sha256:00","content_type":"text/html"}]}`))
	f.Add([]byte(`{"documents":[{"text":"<p>x</p>","content_type":"text/html","metadata":{"k":"v"}}]}`))
	f.Add([]byte(`{"documents":[{"title":"scan","text":"%PDF-1.7\n","content_type":"application/pdf"}]}`))
	f.Add([]byte(`{"documents":[]}`))
	f.Add([]byte(`[1]`))
	prepare := func(_ agent.Document, text string) error {
		knowledge.Split(text, knowledge.SplitOptions{})
		return nil
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in ingestRequest
		err := decodeJSON("the ingest", data, &in)
		if err == nil {
			err = checkIngest(in, prepare)
		}
		if err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			return
		}
		require.NotEmpty(t, in.Documents)
		require.LessOrEqual(t, len(in.Documents), MaxIngestDocuments)
		for _, d := range in.Documents {
			require.True(t, (d.Text == "") != (d.Ref == ""))
		}
	})
}

// FuzzCollectionAndSearchBodies: a collection's and a search's bodies
// are decoded, and a collection checked, without a panic; what fails is
// Invalid, and a collection that passes has a valid name.
func FuzzCollectionAndSearchBodies(f *testing.F) {
	f.Add([]byte(`{"name":"handbook","embedding_model":"openai:text-embedding-3-small","dims":256}`))
	f.Add([]byte(`{"query":"refunds","mode":"hybrid","top_k":5,"filter":{"lang":"en"}}`))
	f.Add([]byte(`{"name":"../x","dims":-1}`))
	f.Add([]byte(`{"query":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c collectionRequest
		if err := decodeJSON("the collection", data, &c); err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		} else {
			col := agent.Collection{Tenant: "acme", Name: c.Name, Description: c.Description, EmbeddingModel: c.EmbeddingModel, Dims: c.Dims}
			if err := col.Validate(); err != nil {
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			} else {
				require.NotEmpty(t, col.Name)
			}
		}
		var s searchRequest
		if err := decodeJSON("the search", data, &s); err != nil {
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
		}
	})
}
