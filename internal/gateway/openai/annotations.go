package openai

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
)

// Citations as OpenAI's annotations. A chunk has no web address: its URL
// is agentflow://document/<document id>#<position> (its chunk id after
// the scheme), which names the document and the chunk as the result's
// citations do.

// urlCitation is a chat completion message's annotation of a chunk it
// cites. The span is the whole answer: an answer draws on its chunks as
// a whole, and its markers [n] say where only within what the model saw.
type urlCitation struct {
	Type        string `json:"type"` // url_citation
	URLCitation struct {
		StartIndex int    `json:"start_index"`
		EndIndex   int    `json:"end_index"`
		Title      string `json:"title"`
		URL        string `json:"url"`
	} `json:"url_citation"`
}

// chunkURL is a cited chunk's URL.
func chunkURL(c agent.Citation) string { return "agentflow://document/" + c.ChunkID }

func urlCitations(answer string, cs []agent.Citation) []urlCitation {
	out := make([]urlCitation, 0, len(cs))
	for _, c := range cs {
		a := urlCitation{Type: "url_citation"}
		a.URLCitation.EndIndex = utf8.RuneCountInString(answer)
		a.URLCitation.Title = c.DocumentTitle
		a.URLCitation.URL = chunkURL(c)
		out = append(out, a)
	}
	return out
}

// fileCitations are a response's output_text annotations of the chunks
// it cites: file_citation, the document as the file, index its place in
// the list.
func fileCitations(cs []agent.Citation) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(cs))
	for i, c := range cs {
		raw, _ := json.Marshal(struct {
			Type     string `json:"type"`
			FileID   string `json:"file_id"`
			Filename string `json:"filename"`
			Index    int    `json:"index"`
		}{"file_citation", c.DocumentID, c.DocumentTitle, i})
		out = append(out, raw)
	}
	return out
}
