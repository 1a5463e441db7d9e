package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/contract"
	"github.com/agentflow/agentflow/internal/testserver"
	pb "github.com/agentflow/agentflow/proto/agentflow/v1"
)

// passageRE captures the first passage of a retrieval as agent.Passages
// writes it: its title, its chunk id and its text, up to the next
// passage.
const passageRE = `(?s)\[1\] (?P<title>[^\n]+?) \(chunk (?P<chunk>[^)\s]+)\)\n(?P<passage>.*?)(?:\n\n\[2\] |$)`

// answersScript: the librarian asks its retrieve tool the user's question
// as it is, then answers by quoting the first passage under its marker;
// the prepared agent, whose context already holds the passages, quotes
// the first of them.
const answersScript = `
rules:
  - name: quote-context
    when: {system: '` + passageRE + `'}
    reply: {text: 'From ${title}: ${passage} [1]'}
  - name: quote
    when: {tool: '` + passageRE + `'}
    reply: {text: 'According to ${title}: ${passage} [1]'}
  - name: look-up
    when: {user: '^(?P<q>[^"\\]+)$'}
    reply: {tool_calls: [{name: library, arguments: '{"query": "${q}"}'}]}
`

// answersCatalog is applied once the collection exists: a retrieve
// entry must name the tenant's own.
const answersCatalog = `
tenant: demo
default_agent: librarian
tools:
  - name: library
    kind: retrieve
    config: {collections: [corpus], top_k: 3}
agents:
  - id: librarian
    model: openai:gpt-4o-mini
    tools: [library]
    limits: {max_iterations: 3, turn_timeout_sec: 60}
  - id: prepared
    model: openai:gpt-4o-mini
    prepare:
      retrieve: {collections: [corpus], top_k: 3}
    limits: {max_iterations: 2, turn_timeout_sec: 60}
`

// TestKnowledgeAnswersCite: the shipped corpus, ingested through
// KnowledgeService over gRPC, answers questions whose answers only it
// holds. For 24 questions taken at even steps across the question set
// (those whose fact opens its document: leadQuestions says why), half
// asked over gRPC (AgentService.Invoke) and half over HTTP (POST
// /v1/turns:invoke), the model calls retrieve with the question and
// answers from the first passage: the answer carries the question's
// fact, quoted from its own document, and the result's citations name a
// chunk of that document. One more question goes to an agent whose
// prepare phase retrieves before the first model call, with no tool call.
func TestKnowledgeAnswersCite(t *testing.T) {
	e := newHTTPEnvWith(t, func(o *testserver.Options) { o.Script = answersScript })
	ctx, cancel := context.WithTimeout(grpcAs(context.Background(), e.all), 3*time.Minute)
	defer cancel()
	docs, questions := loadCorpus(t)

	kn := pb.NewKnowledgeServiceClient(e.Conn)
	_, err := kn.CreateCollection(ctx, &pb.CreateCollectionRequest{Name: "corpus", EmbeddingModel: "openai:text-embedding-3-small"})
	require.NoError(t, err)
	in := &pb.IngestDocumentsRequest{Collection: "corpus"}
	for _, d := range docs {
		in.Documents = append(in.Documents, &pb.IngestDocument{Title: d.Title, ContentType: d.ContentType, Text: d.Text, Metadata: d.Metadata})
	}
	started, err := kn.IngestDocuments(ctx, in)
	require.NoError(t, err)
	var st *pb.IngestStatus
	require.Eventually(t, func() bool {
		st, err = kn.GetIngest(ctx, &pb.GetIngestRequest{Id: started.GetId()})
		require.NoError(t, err)
		return st.GetState() != contract.IngestRunning
	}, 2*time.Minute, 100*time.Millisecond)
	require.Equal(t, contract.IngestCompleted, st.GetState(), st.GetError())
	require.Equal(t, int32(len(docs)), st.GetStored())
	require.NoError(t, testserver.ApplyCatalogs(ctx, e.Store(), e.Tools(), answersCatalog, httpCatalogs[1]))

	// Each title's document id, to check citations against.
	ids := map[string]string{}
	for after := ""; ; {
		page, err := kn.ListDocuments(ctx, &pb.ListDocumentsRequest{Collection: "corpus", After: after})
		require.NoError(t, err)
		for _, d := range page.GetDocuments() {
			ids[d.GetTitle()] = d.GetId()
		}
		if after = page.GetNextAfter(); after == "" {
			break
		}
	}
	require.Len(t, ids, len(docs))

	asked := leadQuestions(docs, questions)
	require.GreaterOrEqual(t, len(asked), 300, "most of the corpus's facts open their document")
	agents := pb.NewAgentServiceClient(e.Conn)
	step := len(asked) / 24
	for i := range 24 {
		q := asked[i*step]
		job := "answer-" + testserver.RandomID()
		var res *pb.TurnResult
		door := "gRPC"
		if i%2 == 0 {
			res, err = agents.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{JobId: job, Prompt: q.Question}})
			require.NoError(t, err)
		} else {
			door = "HTTP"
			res = new(pb.TurnResult)
			body, err := json.Marshal(map[string]string{"job_id": job, "prompt": q.Question})
			require.NoError(t, err)
			e.ok(http.MethodPost, "/v1/turns:invoke", e.user, string(body), res)
		}
		require.Equal(t, agent.StatusCompleted, res.GetStatus(), "%s %q: %s", door, q.Question, res.GetError().GetMessage())
		require.Equal(t, "library", toolNames(res), "%s %q", door, q.Question)
		requireCited(t, res, q, ids[q.Document], "According to "+q.Document+": ")
	}

	q := asked[step/2]
	res, err := agents.Invoke(ctx, &pb.InvokeRequest{Turn: &pb.TurnRequest{AgentId: "prepared", JobId: "prepared-" + testserver.RandomID(),
		Prompt: q.Question}})
	require.NoError(t, err)
	require.Equal(t, agent.StatusCompleted, res.GetStatus(), res.GetError().GetMessage())
	require.Empty(t, res.GetMetadata().GetToolCalls(), "the prepare phase retrieves without a tool call")
	requireCited(t, res, q, ids[q.Document], "From "+q.Document+": ")
}

// leadQuestions are the questions whose answer lies in the first section
// of their document, before its second heading, in the question set's
// order. The scripted model quotes the first passage only, and for a
// question whose answer lies under a later heading ("## Specifications")
// the first passage is another chunk of the same document about one time
// in ten (the scripted vectors see a document's chunks alike; BENCHMARKS.md,
// "Knowledge retrieval quality"), where a real model reads them all.
func leadQuestions(docs []corpusDocument, questions []corpusQuestion) []corpusQuestion {
	lead := map[string]string{}
	for _, d := range docs {
		text := d.Text
		for _, heading := range []string{"\n## ", "<h2>"} {
			text, _, _ = strings.Cut(text, heading)
		}
		lead[d.Title] = text
	}
	var out []corpusQuestion
	for _, q := range questions {
		if strings.Contains(lead[q.Document], q.Answer) {
			out = append(out, q)
		}
	}
	return out
}

// toolNames names the tools a turn called, in order.
func toolNames(res *pb.TurnResult) string {
	var names []string
	for _, c := range res.GetMetadata().GetToolCalls() {
		names = append(names, c.GetTool())
	}
	return strings.Join(names, ",")
}

// requireCited asserts that res answers q from its document: the answer
// begins with prefix (which names the document whose passage it quotes)
// and carries q's answer, and the citations name a chunk of docID.
func requireCited(t *testing.T, res *pb.TurnResult, q corpusQuestion, docID, prefix string) {
	t.Helper()
	require.NotEmpty(t, docID, q.Document)
	out := res.GetOutput()
	require.True(t, strings.HasPrefix(out, prefix), "%q: %q", q.Question, out)
	require.Contains(t, out, q.Answer, q.Question)
	require.True(t, strings.HasSuffix(out, "[1]"), out)
	require.NotEmpty(t, res.GetCitations(), q.Question)
	c := res.GetCitations()[0]
	require.Equal(t, docID, c.GetDocumentId(), "%q cites %s", q.Question, c.GetDocumentTitle())
	require.Equal(t, q.Document, c.GetDocumentTitle())
	require.Equal(t, agent.ChunkID(docID, int(c.GetPosition())), c.GetChunkId())
	require.NotContains(t, out, "(chunk", "the quote is the passage's text, not its heading")
}
