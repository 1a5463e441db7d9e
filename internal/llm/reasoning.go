package llm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
)

// OpenAI-compatible servers name a reply's reasoning two ways:
// "reasoning_content" (DeepSeek, vLLM until 0.10, the scripted server) and
// "reasoning" (OpenRouter, newer vLLM, Ollama's /v1). langchaingo v0.1.14
// reads only reasoning_content, so the transport copies a "reasoning"
// string into reasoning_content where a reply has none: in each delta of
// a stream and in each message of a plain reply.

// reasoningKey is what a payload must contain to be worth parsing.
var reasoningKey = []byte(`"reasoning"`)

// aliasReasoning returns payload (a chat completion or chunk) with each
// choice's member ("delta" or "message") given a reasoning_content copied
// from its reasoning, and whether it changed anything. Payloads that are
// not of that shape are left alone.
func aliasReasoning(payload []byte, member string) ([]byte, bool) {
	if !bytes.Contains(payload, reasoningKey) {
		return nil, false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(payload, &top) != nil {
		return nil, false
	}
	var choices []map[string]json.RawMessage
	if json.Unmarshal(top["choices"], &choices) != nil {
		return nil, false
	}
	changed := false
	for _, c := range choices {
		var m map[string]json.RawMessage
		if json.Unmarshal(c[member], &m) != nil || m == nil {
			continue
		}
		var reasoning, content string
		if json.Unmarshal(m["reasoning"], &reasoning) != nil || reasoning == "" {
			continue
		}
		if json.Unmarshal(m["reasoning_content"], &content) == nil && content != "" {
			continue // the server sent both: keep what langchaingo reads
		}
		m["reasoning_content"] = m["reasoning"]
		b, err := json.Marshal(m)
		if err != nil {
			continue
		}
		c[member], changed = b, true
	}
	if !changed {
		return nil, false
	}
	b, err := json.Marshal(choices)
	if err != nil {
		return nil, false
	}
	top["choices"] = b
	out, err := json.Marshal(top)
	if err != nil {
		return nil, false
	}
	return out, true
}

// aliasSSELine aliases the reasoning of one SSE line ("data: {…}\n").
func aliasSSELine(line []byte) []byte {
	rest, ok := bytes.CutPrefix(line, []byte("data:"))
	if !ok {
		return line
	}
	body := bytes.TrimSpace(rest)
	out, changed := aliasReasoning(body, "delta")
	if !changed {
		return line
	}
	eol := line[len(bytes.TrimRight(line, "\r\n")):]
	return append(append([]byte("data: "), out...), eol...)
}

// sseReasoning passes an SSE stream through line by line, aliasing the
// reasoning of its data lines. A line is passed on as soon as it is
// complete, so the stream is not delayed.
type sseReasoning struct {
	body    io.ReadCloser
	r       *bufio.Reader
	pending []byte
	err     error
}

func newSSEReasoning(body io.ReadCloser) *sseReasoning {
	return &sseReasoning{body: body, r: bufio.NewReader(body)}
}

func (s *sseReasoning) Read(p []byte) (int, error) {
	for len(s.pending) == 0 && s.err == nil {
		line, err := s.r.ReadBytes('\n')
		if len(line) > 0 {
			s.pending = aliasSSELine(line)
		}
		s.err = err
	}
	if len(s.pending) == 0 {
		return 0, s.err
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

func (s *sseReasoning) Close() error { return s.body.Close() }

// jsonReasoning aliases the reasoning of a plain (not streamed) reply: it
// reads the whole body at its first Read, as the client would.
type jsonReasoning struct {
	body io.ReadCloser
	r    io.Reader
}

func (j *jsonReasoning) Read(p []byte) (int, error) {
	if j.r == nil {
		b, err := io.ReadAll(j.body)
		if out, changed := aliasReasoning(b, "message"); changed && err == nil {
			b = out
		}
		j.r = io.MultiReader(bytes.NewReader(b), errReader{err})
	}
	return j.r.Read(p)
}

func (j *jsonReasoning) Close() error { return j.body.Close() }

// errReader returns err, or io.EOF when err is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}
