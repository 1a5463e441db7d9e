package jqproc

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/itchyny/gojq"
	"github.com/stretchr/testify/require"
)

func nested(depth int) any {
	var v any = "leaf"
	for range depth {
		v = []any{v}
	}
	return v
}

func TestValueRoundTrip(t *testing.T) {
	huge, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	for _, v := range []any{
		nil, true, false, 0, -1, math.MaxInt, math.MinInt, 1.5, math.Copysign(0, -1), math.NaN(), math.Inf(-1), math.SmallestNonzeroFloat64,
		json.Number("12.50"), json.Number("-1e400"), huge, "", "é\x00\xff\"", strings.Repeat("x", 1000),
		[]any{}, map[string]any{}, []any{1, "a", nil, []any{map[string]any{"": 1, "k": []any{}}}},
		nested(DefaultMaxDepth - 1),
	} {
		b, err := appendValue(nil, v, DefaultMaxDepth)
		require.NoError(t, err, "%#v", v)
		got, err := decodeValue(b, DefaultMaxDepth)
		require.NoError(t, err)
		require.True(t, same(v, got), "want %#v, got %#v", v, got)
	}
}

func TestValueEncodesOtherGoTypes(t *testing.T) {
	b, err := appendValue(nil, map[string]any{"t": []map[string]any{{"a": int64(7), "b": float32(0.5)}}}, DefaultMaxDepth)
	require.NoError(t, err)
	got, err := decodeValue(b, DefaultMaxDepth)
	require.NoError(t, err)
	require.Equal(t, map[string]any{"t": []any{map[string]any{"a": 7, "b": 0.5}}}, got)

	_, err = appendValue(nil, struct{}{}, DefaultMaxDepth)
	require.EqualError(t, err, "cannot encode a struct {}")
}

func TestValueDepth(t *testing.T) {
	// As the engine's sizer counts: the top value is at depth 0, and
	// nothing may sit deeper than the limit.
	b, err := appendValue(nil, nested(3), 3)
	require.NoError(t, err)
	_, err = decodeValue(b, 3)
	require.NoError(t, err)
	_, err = appendValue(nil, nested(4), 3)
	require.ErrorIs(t, err, errTooDeep)
	_, err = decodeValue(b, 2)
	require.ErrorIs(t, err, errTooDeep)
	_, err = appendValue(nil, nested(1_000_000), DefaultMaxDepth)
	require.ErrorIs(t, err, errTooDeep, "a deep value is refused without walking it all")
}

// wireSizeBound checks appendValue's promise: at most three times the
// JSON size that the pipeline engine measures (strings without escapes,
// int and float64 as 8 bytes).
func TestWireSizeBound(t *testing.T) {
	for _, v := range []any{
		nil, true, 0, 1 << 62, 1.5, json.Number("1"), json.Number("12345678901234567890"), big.NewInt(1), "", "a",
		[]any{}, []any{json.Number("1"), json.Number("1")}, map[string]any{"": json.Number("1")}, map[string]any{"k": []any{}},
		[]any{nil, nil, nil}, strings.Repeat("é", 200),
	} {
		b, err := appendValue(nil, v, DefaultMaxDepth)
		require.NoError(t, err)
		require.LessOrEqual(t, len(b), 3*jsonSize(v), "%#v", v)
	}
}

// jsonSize is the pipeline engine's measure (internal/pipeline sizeOf).
func jsonSize(v any) int {
	switch x := v.(type) {
	case nil:
		return 4
	case bool:
		return 5
	case string:
		return len(x) + 2
	case json.Number:
		return len(x)
	case int, float64:
		return 8
	case *big.Int:
		return x.BitLen()/3 + 2
	case []any:
		n := 1 + len(x)
		for _, e := range x {
			n += jsonSize(e)
		}
		return n
	case map[string]any:
		n := 1 + len(x)
		for k, e := range x {
			n += len(k) + 3 + jsonSize(e)
		}
		return n
	}
	panic(v)
}

func TestDecodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		in   string
		err  string
	}{
		{"empty", "", "value ends early"},
		{"unknown tag", "x", `unknown tag 'x' at byte 0`},
		{"trailing bytes", "nn", "1 bytes after the value"},
		{"short float", "d\x00\x00", "value ends early"},
		{"short string", "s\x05ab", "value ends early"},
		{"count over the bytes left", "a\xff\xff\xff\xff\x0f", "array of 4294967295 elements in 0 bytes"},
		{"object count over the bytes left", "o\x02s", "object of 2 entries in 1 bytes"},
		{"not a number", "N\x03abc", `number "abc" is not a JSON number`},
		{"number with space", "N\x02 1", `number " 1" is not a JSON number`},
		{"not a big integer", "B\x021x", `big integer "1x" is not a decimal integer`},
		{"varint too long", "i\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f", "varint overflows 64 bits"},
		{"too deep", "a\x01a\x01a\x01n", "value is nested too deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			maxDepth := DefaultMaxDepth
			if tt.name == "too deep" {
				maxDepth = 1
			}
			_, err := decodeValue([]byte(tt.in), maxDepth)
			require.EqualError(t, err, tt.err)
		})
	}
}

func TestRequestRoundTrip(t *testing.T) {
	in := request{query: ".a | length", input: map[string]any{"a": []any{1, "x"}}, timeout: 5000, maxDepth: 7}
	b, err := appendRequest(nil, in)
	require.NoError(t, err)
	got, err := decodeRequest(b)
	require.NoError(t, err)
	require.Equal(t, in, got)
	_, err = decodeRequest(append(b, 'n'))
	require.EqualError(t, err, "1 bytes after the input")
	_, err = decodeRequest(b[:5])
	require.EqualError(t, err, "query: value ends early")
}

// frames writes frames as a child would.
func frames(t testing.TB, fs ...[]byte) *bufio.Reader {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	for _, f := range fs {
		require.NoError(t, writeFrame(w, f[0], f[1:]))
	}
	require.NoError(t, w.Flush())
	return bufio.NewReader(&b)
}

func frame(kind byte, payload ...byte) []byte { return append([]byte{kind}, payload...) }

func TestReadResults(t *testing.T) {
	one, _ := appendValue(nil, 1, DefaultMaxDepth)
	text, _ := appendValue(nil, strings.Repeat("x", 100), DefaultMaxDepth)
	tests := []struct {
		name     string
		frames   [][]byte
		maxBytes int
		want     []any
		retire   bool
		err      error
		msg      string
	}{
		{name: "outputs then done", frames: [][]byte{frame('v', one...), frame('v', one...), frame('d', 0)}, want: []any{1, 1}},
		{name: "retiring", frames: [][]byte{frame('d', flagRetire)}, retire: true},
		{name: "the program's error, then done", frames: [][]byte{frame('v', one...), frame('e', append([]byte{errProgram}, "boom"...)...), frame('d', 0)},
			want: []any{1}, msg: "boom"},
		{name: "too deep", frames: [][]byte{frame('e', append([]byte{errDepth}, "deep"...)...), frame('d', 0)}, err: ErrTooDeep},
		{name: "outputs over maxBytes", frames: [][]byte{frame('v', text...), frame('v', text...), frame('d', 0)}, maxBytes: 150,
			want: []any{strings.Repeat("x", 100)}, err: ErrTooLarge},
		{name: "a frame too long to read", frames: [][]byte{frame('v', make([]byte, maxControlFrame+1)...)}, maxBytes: 100, err: ErrTooLarge},
		{name: "the stream ends", frames: [][]byte{frame('v', one...)}, want: []any{1}, err: errDied},
		{name: "an output after an error", frames: [][]byte{frame('e', errProgram), frame('v', one...)}, msg: "jq process sent an output after an error"},
		{name: "a value that does not decode", frames: [][]byte{frame('v', 'x')}, msg: "jq process sent an output that does not decode: unknown tag 'x' at byte 0"},
		{name: "an unknown frame", frames: [][]byte{frame('h')}, msg: `jq process sent a 'h' frame mid-run`},
		{name: "a bad done frame", frames: [][]byte{frame('d')}, msg: "jq process sent a done frame of 0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []any
			retire, err := readResults(frames(t, tt.frames...), tt.maxBytes, DefaultMaxDepth, func(v any, _ error) bool {
				got = append(got, v)
				return true
			})
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.retire, retire)
			switch {
			case tt.err != nil:
				require.ErrorIs(t, err, tt.err)
			case tt.msg != "":
				require.EqualError(t, err, tt.msg)
			default:
				require.NoError(t, err)
			}
		})
	}
}

// canonical writes a decoded value as gojq's JSON (keys sorted, NaN as
// null), to compare two decodings.
func canonical(t *testing.T, v any) string {
	b, err := gojq.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// FuzzDecodeValue: any bytes decode to a value or an error, without a
// panic; a value encodes back to bytes that decode to the same value.
func FuzzDecodeValue(f *testing.F) {
	for _, v := range []any{nil, 1, 1.5, "s", json.Number("2"), big.NewInt(3), []any{map[string]any{"a": []any{true}}}} {
		b, _ := appendValue(nil, v, DefaultMaxDepth)
		f.Add(b)
	}
	f.Add([]byte("a\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeValue(b, 16)
		if err != nil {
			return
		}
		again, err := appendValue(nil, v, 16)
		require.NoError(t, err)
		w, err := decodeValue(again, 16)
		require.NoError(t, err)
		require.Equal(t, canonical(t, v), canonical(t, w))
	})
}

// FuzzDecodeRequest: what a child reads from its pipe decodes or fails
// cleanly.
func FuzzDecodeRequest(f *testing.F) {
	b, _ := appendRequest(nil, request{query: ".[]", input: []any{1, 2}, timeout: 100, maxDepth: 8})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			return
		}
		again, err := appendRequest(nil, r)
		require.NoError(t, err)
		s, err := decodeRequest(again)
		require.NoError(t, err)
		require.Equal(t, r.query, s.query)
		require.Equal(t, canonical(t, r.input), canonical(t, s.input))
	})
}

// FuzzReadResults: whatever a child sends, the parent gets outputs and an
// error without a panic, and never more than maxBytes of outputs.
func FuzzReadResults(f *testing.F) {
	one, _ := appendValue(nil, []any{1, "x"}, DefaultMaxDepth)
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	_ = writeFrame(w, frameValue, one)
	_ = writeFrame(w, frameError, []byte{errProgram, 'x'})
	_ = writeFrame(w, frameDone, []byte{0})
	_ = w.Flush()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		const maxBytes = 1 << 10
		n := 0
		_, err := readResults(bufio.NewReader(bytes.NewReader(b)), maxBytes, 16, func(v any, _ error) bool {
			enc, err := appendValue(nil, v, 16)
			require.NoError(t, err)
			n += len(enc)
			return true
		})
		require.LessOrEqual(t, n, maxBytes)
		require.False(t, errors.Is(err, errStopped))
	})
}
