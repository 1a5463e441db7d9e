package openapi

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
)

// Source is a document as it was read, before it is loaded: JSON (a YAML
// document is converted to JSON as it is read), kept gzip-compressed in
// memory. An API description compresses to a tenth of its size or less,
// so a document of tens of megabytes costs a few while Narrow reads it.
// It is safe for concurrent use.
type Source struct {
	gz   []byte
	size int64 // bytes as JSON
	sum  string
}

// TooLargeError is Read's error for a document larger than its limit.
type TooLargeError struct {
	Limit int64
	// YAML says a YAML document's JSON form was too large: it may be
	// twice the limit (aliases may expand a small document).
	YAML bool
}

func (e *TooLargeError) Error() string {
	if e.YAML {
		return fmt.Sprintf("the YAML document is larger than %d bytes as JSON", e.Limit)
	}
	return fmt.Sprintf("the document is larger than %d bytes", e.Limit)
}

// yamlExpansion bounds a YAML document's JSON form, a multiple of its
// limit: aliases may expand a small document into a huge one.
const yamlExpansion = 2

// Read reads a document of at most limit bytes, JSON or YAML, from r. A
// JSON document (one that starts with "{") is streamed into the Source
// without being held whole; a YAML document is read whole and converted,
// which holds its YAML tree in memory for a moment (about fifteen times
// its size, measured: name the JSON form of a large document). A larger document is a
// *TooLargeError; one that cannot be read as YAML is agent.CodeInvalid;
// the reader's own errors are returned as they are.
func Read(r io.Reader, limit int64) (*Source, error) {
	h := sha256.New()
	in := bufio.NewReaderSize(io.TeeReader(&limitReader{r: r, left: limit}, h), 64<<10)
	// A byte-order mark and leading space say nothing of the format.
	if bom, err := in.Peek(3); err == nil && bytes.Equal(bom, []byte("\xef\xbb\xbf")) {
		_, _ = in.Discard(3)
	}
	first, err := firstByte(in)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, readError(err, limit)
	}
	var out bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&out, gzip.BestSpeed)
	s := &Source{}
	counted := &countWriter{w: zw}
	if first == '{' {
		_, err = io.Copy(counted, in)
	} else {
		err = yamlToJSON(counted, in, limit)
	}
	if err != nil {
		return nil, readError(err, limit)
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	s.gz, s.size, s.sum = bytes.Clone(out.Bytes()), counted.n, hex.EncodeToString(h.Sum(nil))
	return s, nil
}

// ReadBytes is Read of a document in memory, with no limit.
func ReadBytes(data []byte) (*Source, error) {
	return Read(bytes.NewReader(data), int64(len(data)))
}

// Size is the document's size as JSON, in bytes.
func (s *Source) Size() int64 { return s.size }

// Sum is the SHA-256 of the document as it was read, in hex.
func (s *Source) Sum() string { return s.sum }

// open returns the document, JSON.
func (s *Source) open() io.Reader {
	zr, err := gzip.NewReader(bytes.NewReader(s.gz))
	if err != nil {
		// Written by Read: a bug, reported as a document that cannot be read.
		return errReader{err}
	}
	return zr
}

// JSON returns the whole document, for documents small enough to load whole.
func (s *Source) JSON() ([]byte, error) {
	return io.ReadAll(s.open())
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

var errLimit = errors.New("limit")

// limitReader fails a read past the limit.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errLimit
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errLimit
	}
	return n, err
}

type countWriter struct {
	w     io.Writer
	n     int64
	limit int64 // 0: none
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	if c.limit > 0 && c.n > c.limit {
		return 0, errLimit
	}
	return c.w.Write(p)
}

func readError(err error, limit int64) error {
	var yl *yamlLimit
	switch {
	case errors.Is(err, errLimit):
		return &TooLargeError{Limit: limit}
	case errors.As(err, &yl):
		return &TooLargeError{Limit: limit * yamlExpansion, YAML: true}
	}
	return err
}

// firstByte returns the first byte that is not space, unread.
func firstByte(in *bufio.Reader) (byte, error) {
	for {
		c, err := in.ReadByte()
		if err != nil {
			return 0, err
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c, in.UnreadByte()
	}
}

// yamlLimit is yamlToJSON's error when the JSON grows past its bound.
type yamlLimit struct{}

func (*yamlLimit) Error() string { return "too large as JSON" }

// yamlToJSON converts a YAML document to JSON, as kin-openapi reads YAML:
// timestamps stay strings, keys are strings (a response's 200 is "200").
// The top-level openapi and swagger versions are strings whatever YAML
// makes of them (`openapi: 3.1` is a number to YAML).
func yamlToJSON(w *countWriter, r io.Reader, limit int64) error {
	root, err := parseYAML(r)
	if err != nil {
		return err
	}
	w.limit = limit * yamlExpansion
	bw := bufio.NewWriter(w)
	c := yamlConverter{w: bw}
	if err := c.value(root, 0, true); err != nil {
		if errors.Is(err, errLimit) {
			return &yamlLimit{}
		}
		return err
	}
	if err := bw.Flush(); err != nil {
		if errors.Is(err, errLimit) {
			return &yamlLimit{}
		}
		return err
	}
	return nil
}

// parseYAML reads a YAML document's tree; its bytes are let go once
// parsed.
func parseYAML(r io.Reader) (*yaml.Node, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "the document is neither JSON nor YAML: %v", err)
	}
	if root.Kind == 0 {
		return nil, agent.Errorf(agent.CodeInvalid, "the document is empty")
	}
	return &root, nil
}

type yamlConverter struct {
	w *bufio.Writer
}

// maxDepth bounds how deep a document nests (an alias may refer to the
// mapping it is in).
const maxDepth = 200

func (c *yamlConverter) value(n *yaml.Node, depth int, top bool) error {
	if depth > maxDepth {
		return agent.Errorf(agent.CodeInvalid, "line %d: the document nests deeper than %d levels", n.Line, maxDepth)
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return agent.Errorf(agent.CodeInvalid, "the document is empty")
		}
		return c.value(n.Content[0], depth, true)
	case yaml.AliasNode:
		return c.value(n.Alias, depth+1, false)
	case yaml.MappingNode:
		c.w.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.AliasNode {
				k = k.Alias
			}
			if k.Kind != yaml.ScalarNode {
				return agent.Errorf(agent.CodeInvalid, "line %d: a key must be a plain value", k.Line)
			}
			if k.Tag == "!!merge" {
				return agent.Errorf(agent.CodeInvalid, "line %d: YAML merge keys (<<) are not supported: convert the document to JSON", k.Line)
			}
			if i > 0 {
				c.w.WriteByte(',')
			}
			c.str(k.Value)
			c.w.WriteByte(':')
			if top && v.Kind == yaml.ScalarNode && (k.Value == "openapi" || k.Value == "swagger") {
				c.str(v.Value)
				continue
			}
			if err := c.value(v, depth+1, false); err != nil {
				return err
			}
		}
		c.w.WriteByte('}')
	case yaml.SequenceNode:
		c.w.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				c.w.WriteByte(',')
			}
			if err := c.value(v, depth+1, false); err != nil {
				return err
			}
		}
		c.w.WriteByte(']')
	case yaml.ScalarNode:
		c.scalar(n)
	default:
		return agent.Errorf(agent.CodeInvalid, "line %d: a YAML value that has no JSON form", n.Line)
	}
	_, err := c.w.Write(nil)
	return err
}

func (c *yamlConverter) scalar(n *yaml.Node) {
	switch n.ShortTag() {
	case "!!null":
		c.w.WriteString("null")
		return
	case "!!bool", "!!int", "!!float":
		var v any
		if n.Decode(&v) == nil {
			switch x := v.(type) {
			case bool:
				c.w.WriteString(strconv.FormatBool(x))
				return
			case int:
				c.w.WriteString(strconv.Itoa(x))
				return
			case int64:
				c.w.WriteString(strconv.FormatInt(x, 10))
				return
			case uint64:
				c.w.WriteString(strconv.FormatUint(x, 10))
				return
			case float64:
				if b, err := json.Marshal(x); err == nil { // NaN and infinities have no JSON form
					c.w.Write(b)
					return
				}
			}
		}
	}
	c.str(n.Value) // strings, timestamps, binary and what JSON cannot say
}

func (c *yamlConverter) str(s string) {
	b, _ := json.Marshal(s)
	c.w.Write(b)
}
