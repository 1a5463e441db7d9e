package jqproc

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"

	"github.com/agentflow/agentflow/internal/childproc"
)

// The parent and a child talk in frames over two pipes: a kind byte, the
// payload's length as a big-endian uint32, and the payload.
const (
	frameHello   = childproc.FrameHello // child: ready for work (memory capped); payload: protocol version
	frameRequest = 'r'                  // parent: a program to run (see request)
	frameValue   = 'v'                  // child: one output, an encoded value
	frameError   = 'e'                  // child: the run failed (an err kind byte, the message); the done frame follows
	frameDone    = 'd'                  // child: the run ended (a flags byte); the last frame of every run
)

// protocol is the payload of frameHello. Parent and child are always the
// same executable, so a mismatch means the pipe is not talking to a child.
const protocol = "jqproc/1"

// Kinds of frameError.
const (
	errProgram = 'p' // the program's own error: the message is jq's
	errDepth   = 'd' // an output is nested deeper than the request allows
	errTimeout = 't' // the child's own deadline (a backstop: the parent kills first)
)

// flagRetire in frameDone says the child exits after this run: the run
// grew its heap, and a fresh process is smaller than a big idle one.
const flagRetire = 1

// maxControlFrame bounds hello, error and done frames.
const maxControlFrame = childproc.MaxControlFrame

// writeFrame writes one frame; the caller flushes.
func writeFrame(w *bufio.Writer, kind byte, payload []byte) error {
	return childproc.WriteFrame(w, kind, payload)
}

// errFrameTooLarge is readFrame's error for a frame longer than its max.
var errFrameTooLarge = childproc.ErrFrameTooLarge

// readFrame reads one frame of at most max payload bytes (see
// childproc.ReadFrame).
func readFrame(r *bufio.Reader, max int) (kind byte, payload []byte, err error) {
	return childproc.ReadFrame(r, max)
}

// request is one run for a child: the query, its input, how long it may
// run and how deep its input and outputs may nest.
//
// Payload: uvarint timeout in milliseconds (0: none), uvarint max depth,
// uvarint query length, the query, the encoded input.
type request struct {
	query    string
	input    any
	timeout  uint64 // milliseconds
	maxDepth int
}

// appendRequest encodes r (the parent's side).
func appendRequest(b []byte, r request) ([]byte, error) {
	b = binary.AppendUvarint(b, r.timeout)
	b = binary.AppendUvarint(b, uint64(r.maxDepth))
	b = binary.AppendUvarint(b, uint64(len(r.query)))
	b = append(b, r.query...)
	return appendValue(b, r.input, r.maxDepth)
}

// decodeRequest decodes a request (the child's side).
func decodeRequest(p []byte) (request, error) {
	d := decoder{s: string(p)}
	var r request
	var err error
	if r.timeout, err = d.uvarint(); err != nil {
		return r, fmt.Errorf("timeout: %w", err)
	}
	depth, err := d.uvarint()
	if err != nil || depth > math.MaxInt32 {
		return r, fmt.Errorf("max depth: %v", firstOf(err, "out of range"))
	}
	r.maxDepth = int(depth)
	if r.query, err = d.str(); err != nil {
		return r, fmt.Errorf("query: %w", err)
	}
	d.maxDepth = r.maxDepth
	if r.input, err = d.value(0); err != nil {
		return r, fmt.Errorf("input: %w", err)
	}
	if d.i != len(d.s) {
		return r, fmt.Errorf("%d bytes after the input", len(d.s)-d.i)
	}
	return r, nil
}

func firstOf(err error, otherwise string) string {
	if err != nil {
		return err.Error()
	}
	return otherwise
}

// Value tags. A value is a tag and what the tag says follows; lengths and
// counts are uvarints.
const (
	tagNull   = 'n'
	tagFalse  = 'f'
	tagTrue   = 't'
	tagInt    = 'i' // int: zigzag varint
	tagFloat  = 'd' // float64: 8 bytes, IEEE 754 bits, little-endian (NaN and ±Inf kept)
	tagNumber = 'N' // json.Number: length, the literal
	tagBig    = 'B' // *big.Int: length, decimal text
	tagString = 's' // length, bytes
	tagArray  = 'a' // count, values
	tagObject = 'o' // count, then count times: key length, key, value
)

// errTooDeep is the error for a value nested deeper than allowed.
var errTooDeep = errors.New("value is nested too deep")

// appendValue encodes v, a JSON value as encoding/json decodes it or as a
// gojq iterator emits it, with int64, float32 and []map[string]any
// accepted too. It refuses a value that sits more than maxDepth arrays or
// objects deep (the top value is at depth 0) with errTooDeep, before
// walking further, so that its recursion stays shallow whatever a program
// built.
//
// The encoding is at most three times as long as a JSON encoding of v
// whose strings are counted without escapes and whose non-literal numbers
// (int, float64) are counted as 8 bytes: callers that bound JSON size
// bound the wire with that factor.
func appendValue(b []byte, v any, maxDepth int) ([]byte, error) {
	return appendAt(b, v, 0, maxDepth)
}

func appendAt(b []byte, v any, depth, maxDepth int) ([]byte, error) {
	if depth > maxDepth {
		return b, errTooDeep
	}
	switch x := v.(type) {
	case nil:
		return append(b, tagNull), nil
	case bool:
		if x {
			return append(b, tagTrue), nil
		}
		return append(b, tagFalse), nil
	case int:
		return binary.AppendVarint(append(b, tagInt), int64(x)), nil
	case int64:
		return binary.AppendVarint(append(b, tagInt), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(x)), nil
	case float32:
		return binary.LittleEndian.AppendUint64(append(b, tagFloat), math.Float64bits(float64(x))), nil
	case json.Number:
		return appendString(append(b, tagNumber), string(x)), nil
	case *big.Int:
		return appendString(append(b, tagBig), x.String()), nil
	case string:
		return appendString(append(b, tagString), x), nil
	}
	var err error
	switch x := v.(type) {
	case []any:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(x)))
		for _, e := range x {
			if b, err = appendAt(b, e, depth+1, maxDepth); err != nil {
				return b, err
			}
		}
		return b, nil
	case []map[string]any:
		b = binary.AppendUvarint(append(b, tagArray), uint64(len(x)))
		for _, e := range x {
			if b, err = appendAt(b, e, depth+1, maxDepth); err != nil {
				return b, err
			}
		}
		return b, nil
	case map[string]any:
		b = binary.AppendUvarint(append(b, tagObject), uint64(len(x)))
		for k, e := range x {
			b = appendString(b, k)
			if b, err = appendAt(b, e, depth+1, maxDepth); err != nil {
				return b, err
			}
		}
		return b, nil
	}
	return b, fmt.Errorf("cannot encode a %T", v)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeValue decodes one value that fills p. Strings share one copy of
// p. Counts are checked against the bytes left before anything is
// allocated for them, so a short payload cannot ask for a large
// allocation.
func decodeValue(p []byte, maxDepth int) (any, error) {
	d := decoder{s: string(p), maxDepth: maxDepth}
	v, err := d.value(0)
	if err != nil {
		return nil, err
	}
	if d.i != len(d.s) {
		return nil, fmt.Errorf("%d bytes after the value", len(d.s)-d.i)
	}
	return v, nil
}

type decoder struct {
	s        string
	i        int
	maxDepth int
}

var errShort = errors.New("value ends early")

func (d *decoder) value(depth int) (any, error) {
	if depth > d.maxDepth {
		return nil, errTooDeep
	}
	if d.i >= len(d.s) {
		return nil, errShort
	}
	tag := d.s[d.i]
	d.i++
	switch tag {
	case tagNull:
		return nil, nil
	case tagFalse:
		return false, nil
	case tagTrue:
		return true, nil
	case tagInt:
		n, err := d.varint()
		if err != nil {
			return nil, err
		}
		if n < math.MinInt || n > math.MaxInt {
			return nil, fmt.Errorf("int %d out of range", n)
		}
		return int(n), nil
	case tagFloat:
		if len(d.s)-d.i < 8 {
			return nil, errShort
		}
		var bits uint64
		for k := 7; k >= 0; k-- {
			bits = bits<<8 | uint64(d.s[d.i+k])
		}
		d.i += 8
		return math.Float64frombits(bits), nil
	case tagNumber:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		if !isNumber(s) {
			return nil, fmt.Errorf("number %q is not a JSON number", clip(s))
		}
		return json.Number(s), nil
	case tagBig:
		s, err := d.str()
		if err != nil {
			return nil, err
		}
		n, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return nil, fmt.Errorf("big integer %q is not a decimal integer", clip(s))
		}
		return n, nil
	case tagString:
		return d.str()
	case tagArray, tagObject:
		n, err := d.uvarint()
		if err != nil {
			return nil, err
		}
		if tag == tagArray {
			return d.array(n, depth)
		}
		return d.object(n, depth)
	}
	return nil, fmt.Errorf("unknown tag %q at byte %d", tag, d.i-1)
}

func (d *decoder) array(n uint64, depth int) (any, error) {
	if n > uint64(len(d.s)-d.i) { // each element takes a byte at least
		return nil, fmt.Errorf("array of %d elements in %d bytes", n, len(d.s)-d.i)
	}
	out := make([]any, n)
	for j := range out {
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[j] = v
	}
	return out, nil
}

func (d *decoder) object(n uint64, depth int) (any, error) {
	if n > uint64(len(d.s)-d.i)/2 { // each entry takes two bytes at least
		return nil, fmt.Errorf("object of %d entries in %d bytes", n, len(d.s)-d.i)
	}
	out := make(map[string]any, n)
	for range n {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, nil
}

func (d *decoder) str() (string, error) {
	n, err := d.uvarint()
	if err != nil {
		return "", err
	}
	if n > uint64(len(d.s)-d.i) {
		return "", errShort
	}
	s := d.s[d.i : d.i+int(n)]
	d.i += int(n)
	return s, nil
}

func (d *decoder) uvarint() (uint64, error) {
	var x uint64
	for shift := uint(0); shift < 64; shift += 7 {
		if d.i >= len(d.s) {
			return 0, errShort
		}
		c := d.s[d.i]
		d.i++
		if shift == 63 && c > 1 {
			return 0, errors.New("varint overflows 64 bits")
		}
		x |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return x, nil
		}
	}
	return 0, errors.New("varint overflows 64 bits")
}

func (d *decoder) varint() (int64, error) {
	u, err := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x, err
}

// isNumber reports whether s is a JSON number literal: json.Valid
// accepts exactly the literals once s starts with a sign or a digit and
// ends with a digit (no space around it).
func isNumber(s string) bool {
	return s != "" && (s[0] == '-' || isDigit(s[0])) && isDigit(s[len(s)-1]) && json.Valid([]byte(s))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// clip cuts s for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
