package scripted

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
	"sync"
	"unicode"
)

// EmbeddingDims is the length of the scripted embeddings unless a request
// asks for "dimensions".
const EmbeddingDims = 256

// MaxEmbeddingDims bounds "dimensions".
const MaxEmbeddingDims = 4096

// embedState is the server's embedding faults and count.
type embedState struct {
	mu         sync.Mutex
	failStatus int
	failTimes  int
	retryAfter int
	served     int
}

// FailEmbeddings makes the next times embedding requests fail with
// status (and Retry-After, when retryAfterSec is positive).
func (s *Server) FailEmbeddings(status, times, retryAfterSec int) {
	s.embeds.mu.Lock()
	defer s.embeds.mu.Unlock()
	s.embeds.failStatus, s.embeds.failTimes, s.embeds.retryAfter = status, times, retryAfterSec
}

// Embedded returns how many texts the server has embedded.
func (s *Server) Embedded() int {
	s.embeds.mu.Lock()
	defer s.embeds.mu.Unlock()
	return s.embeds.served
}

func (s *Server) embed(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
		Encoding   string          `json:"encoding_format"`
	}
	if !decodePost(w, r, "an embeddings", &body) {
		return
	}
	inputs, ok := decodeInputs(w, body.Input)
	if !ok {
		return
	}
	dims := body.Dimensions
	switch {
	case len(inputs) == 0:
		writeError(w, http.StatusBadRequest, "input: no texts", 0)
		return
	case body.Encoding != "" && body.Encoding != "float":
		writeError(w, http.StatusBadRequest, "encoding_format: only float is served", 0)
		return
	case dims < 0 || dims > MaxEmbeddingDims:
		writeError(w, http.StatusBadRequest, "dimensions: want 1 to 4096", 0)
		return
	case dims == 0:
		dims = EmbeddingDims
	}
	if status, retry, fail := s.embeds.fault(); fail {
		writeError(w, status, "scripted embedding fault", retry)
		return
	}
	data := make([]map[string]any, len(inputs))
	tokens := 0
	for i, in := range inputs {
		v := Embedding(in, dims)
		if v == nil {
			writeError(w, http.StatusBadRequest, "input: a text has no words", 0)
			return
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
		tokens += (len(in) + 3) / 4
	}
	s.embeds.mu.Lock()
	s.embeds.served += len(inputs)
	s.embeds.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": body.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": tokens, "total_tokens": tokens}})
}

func (e *embedState) fault() (status, retryAfter int, fail bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failTimes <= 0 {
		return 0, 0, false
	}
	e.failTimes--
	return e.failStatus, e.retryAfter, true
}

// Embedding is the scripted embedding of text (see Embeddings above):
// dims values of unit length; nil when text has no word.
func Embedding(text string, dims int) []float32 {
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	if len(words) == 0 || dims <= 0 {
		return nil
	}
	v := make([]float64, dims)
	add := func(feature string, weight float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		x := h.Sum64()
		if x>>63 == 1 {
			weight = -weight
		}
		v[int(x%uint64(dims))] += weight
	}
	for i, w := range words {
		add("w:"+w, 1)
		if i > 0 {
			add("b:"+words[i-1]+" "+w, 0.5)
		}
		padded := []rune("^" + w + "$")
		for j := 0; j+3 <= len(padded); j++ {
			add("t:"+string(padded[j:j+3]), 0.25)
		}
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float32, dims)
	if n == 0 {
		// Every feature cancelled another out: still a direction.
		out[0] = 1
		return out
	}
	inv := 1 / math.Sqrt(n)
	for i, x := range v {
		out[i] = float32(x * inv)
	}
	return out
}

// decodePost decodes the JSON body of a POST into body, or answers with
// the error (what names the request, as in "an embeddings") and returns
// false.
func decodePost(w http.ResponseWriter, r *http.Request, what string, body any) bool {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "use POST for "+r.URL.Path, 0)
		return false
	}
	if err := json.NewDecoder(r.Body).Decode(body); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not "+what+" request: "+err.Error(), 0)
		return false
	}
	return true
}

// decodeInputs reads an OpenAI request's input, one string or an array of
// them, as the embeddings and moderations endpoints take it; it answers
// 400 to anything else.
func decodeInputs(w http.ResponseWriter, raw json.RawMessage) ([]string, bool) {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(raw, &many) != nil {
		writeError(w, http.StatusBadRequest, "input: want a string or an array of strings", 0)
		return nil, false
	}
	return many, true
}
