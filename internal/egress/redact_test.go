package egress_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
)

// chunked reads src n bytes at a time.
type chunked struct {
	src []byte
	n   int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.src) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.n)], c.src)
	c.src = c.src[n:]
	return n, nil
}

// redactAll redacts text at once and streamed in every chunk size, and
// requires the same result from each.
func redactAll(t *testing.T, r *egress.Redactor, text string) string {
	t.Helper()
	want := r.String(text)
	require.Equal(t, want, string(r.Bytes([]byte(text))))
	for n := 1; n <= len(text)+1; n++ {
		got, err := io.ReadAll(r.Reader(&chunked{src: []byte(text), n: n}))
		require.NoError(t, err)
		require.Equal(t, want, string(got), "read %d bytes at a time", n)
	}
	got, err := io.ReadAll(r.Reader(iotest.HalfReader(iotest.DataErrReader(strings.NewReader(text)))))
	require.NoError(t, err)
	require.Equal(t, want, string(got))
	return want
}

func TestRedactor(t *testing.T) {
	const key = "sk-live-0123456789"
	// A value with what JSON, HTML and URLs escape, and a character
	// beyond ASCII and one beyond the basic plane.
	const odd = `pa"ss\w/rd<&>é😀+ =`
	const long = "sk-live-0123456789-and-more" // key is a prefix of it
	r := egress.NewRedactor([]secrets.Secret{
		secrets.New("env:KEY", key), secrets.New("env:ODD", odd), secrets.New("env:LONG", long),
		secrets.New("env:SHORT", "abc"), // below secrets.MinBytes: not looked for
	})
	goJSON, err := json.Marshal(odd)
	require.NoError(t, err)
	tests := []struct{ name, text, want string }{
		{"nothing to find", `{"ok": true, "abc": 1}`, `{"ok": true, "abc": 1}`},
		{"raw, in JSON", `{"key": "` + key + `", "n": 1}`, `{"key": "[secret env:KEY]", "n": 1}`},
		{"twice, at the edges", key + " and " + key, "[secret env:KEY] and [secret env:KEY]"},
		{"the longer value where both start", long + " then " + key + "-x", "[secret env:LONG] then [secret env:KEY]-x"},
		{"as Go writes JSON", `{"k":` + string(goJSON) + `}`, `{"k":"[secret env:ODD]"}`},
		{"JSON without HTML escapes", `{"k":"pa\"ss\\w/rd<&>é😀+ ="}`, `{"k":"[secret env:ODD]"}`},
		{"JSON with \\u escapes", `{"k":"pa\"ss\\w/rd<&>\u00e9\ud83d\ude00+ ="}`, `{"k":"[secret env:ODD]"}`},
		{"JSON with \\/", `{"k":"pa\"ss\\w\/rd<&>é😀+ ="}`, `{"k":"[secret env:ODD]"}`},
		{"JSON with \\/ and \\u escapes", `{"k":"pa\"ss\\w\/rd<&>\u00e9\ud83d\ude00+ ="}`, `{"k":"[secret env:ODD]"}`},
		{"in an echoed query", "GET /x?key=" + url.QueryEscape(odd) + "&a=1", "GET /x?key=[secret env:ODD]&a=1"},
		{"in an echoed path", "/keys/" + url.PathEscape(odd) + "/x", "/keys/[secret env:ODD]/x"},
		{"in base64, as basic authentication sends it", "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(key)),
			"Authorization: Basic [secret env:KEY]"},
		{"a short value is left alone", "abc abc", "abc abc"},
		{"a start that never completes", "sk-liv and sk-live", "sk-liv and sk-live"},
		{"a value split in halves", `{"a": "sk-live-01234", "b": "56789-and-more"}`, `{"a": "[secret env:LONG]", "b": "5[secret env:LONG]"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, redactAll(t, r, tt.text))
		})
	}

	// What holds no value comes back as it was.
	in := []byte("nothing here")
	require.Same(t, &in[0], &r.Bytes(in)[0])
	require.True(t, egress.NewRedactor(nil).Empty())
	require.Equal(t, "x"+key, egress.NewRedactor(nil).String("x"+key))
	var none *egress.Redactor
	require.Equal(t, key, none.String(key))
}

// TestRedactorStreams: bytes that cannot start a value are passed on at
// once, so that a stream of events is not held up waiting for the next.
func TestRedactorStreams(t *testing.T) {
	r := egress.NewRedactor([]secrets.Secret{secrets.New("env:KEY", "sk-live-0123456789")})
	pr, pw := io.Pipe()
	defer pw.Close()
	body := r.Reader(pr)
	got := make(chan string, 1)
	go func() {
		buf := make([]byte, 64)
		n, _ := body.Read(buf)
		got <- string(buf[:n])
	}()
	go func() { _, _ = pw.Write([]byte("data: {\"n\":1}\n\n")) }()
	select {
	case s := <-got:
		require.Equal(t, "data: {\"n\":1}\n\n", s)
	case <-time.After(10 * time.Second):
		t.Fatal("an event that holds no value was held back")
	}

	// The start of a value is held until the value is complete or not.
	go func() {
		buf := make([]byte, 64)
		var all []byte
		for !bytes.Contains(all, []byte("\n\n")) {
			n, err := body.Read(buf)
			all = append(all, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- string(all)
	}()
	_, err := pw.Write([]byte("data: sk-live-01"))
	require.NoError(t, err)
	_, err = pw.Write([]byte("23456789\n\n"))
	require.NoError(t, err)
	require.Equal(t, "data: [secret env:KEY]\n\n", <-got)
}

// TestRedactorCutBody: a body cut short by an error never shows the start
// of a value that was held back.
func TestRedactorCutBody(t *testing.T) {
	r := egress.NewRedactor([]secrets.Secret{secrets.New("env:KEY", "sk-live-0123456789")})
	cut := errors.New("response too large")
	got, err := io.ReadAll(r.Reader(io.MultiReader(strings.NewReader("echo: sk-live-01234"), iotest.ErrReader(cut))))
	require.ErrorIs(t, err, cut)
	require.Equal(t, "echo: ", string(got))
}

func TestRedactorError(t *testing.T) {
	const key = "sk-live-0123456789"
	r := egress.NewRedactor([]secrets.Secret{secrets.New("env:KEY", key)})
	base := errors.New("the cause")
	err := fmt.Errorf("call: %w", &agent.Error{Code: agent.CodeUnavailable, Message: "key " + key + " refused", Err: base})
	red := r.Error(err)
	require.Equal(t, "call: key [secret env:KEY] refused: the cause", red.Error())
	require.True(t, agent.IsCode(red, agent.CodeUnavailable), "the code is kept")
	require.ErrorIs(t, red, base, "the chain is kept")
	var ae *agent.Error
	require.ErrorAs(t, red, &ae)
	require.NotContains(t, ae.Message, key, "an agent error's message is what callers show")
	require.Equal(t, "key [secret env:KEY] refused: the cause", ae.Message)

	plain := errors.New("nothing secret")
	require.Same(t, plain, r.Error(plain))
	require.NoError(t, r.Error(nil))
}

// FuzzRedactor: streamed in any chunks, a body is redacted as it is at
// once; and what comes out holds no value, unless the values are made to
// overlap the placeholders themselves.
func FuzzRedactor(f *testing.F) {
	f.Add([]byte("sk-live-0123456789"), []byte("sk-live-0123"), []byte(`{"a":"sk-live-0123456789","b":"sk-live-0123"}`), uint8(3))
	f.Add([]byte(`pa"ss\w/rd<&>é`), []byte("aaaaaaaaab"), []byte("aaaaaaaaaaaaab pa\\\"ss"), uint8(1))
	f.Add([]byte("12345678"), []byte("23456789"), []byte("123456789"), uint8(2))
	f.Fuzz(func(t *testing.T, a, b, text []byte, n uint8) {
		list := []secrets.Secret{secrets.New("env:FUZZ_A", string(a)), secrets.New("env:FUZZ_B", string(b))}
		r := egress.NewRedactor(list)
		want := r.Bytes(text)
		got, err := io.ReadAll(r.Reader(&chunked{src: text, n: int(n%64) + 1}))
		require.NoError(t, err)
		require.Equal(t, string(want), string(got))

		placeholders := list[0].String() + list[1].String()
		for _, v := range [][]byte{a, b} {
			if len(v) < secrets.MinBytes || bytes.ContainsAny(v, "[]") || strings.Contains(placeholders, string(v)) {
				continue
			}
			require.NotContains(t, string(got), string(v))
		}
	})
}

// readable reports how text still shows secret: the decodings an echo
// may have used, each of every run of its alphabet, searched for the
// secret less its first and last byte (an encoding's characters at the
// edges of a value also carry bits of what is next to it); "" when none
// does.
func readable(text, secret string) string {
	inner := secret[1 : len(secret)-1]
	fold := strings.ToLower
	if strings.Contains(fold(text), fold(inner)) {
		return "as it is, in any case"
	}
	for _, d := range []struct {
		name   string
		decode func(string) string
	}{
		{"JSON-decoded", func(s string) string {
			var doc map[string]any
			_ = json.Unmarshal([]byte(s), &doc)
			return fmt.Sprint(doc)
		}},
		{"URL-decoded", func(s string) string { v, _ := url.QueryUnescape(s); return v }},
		{"path-decoded", func(s string) string { v, _ := url.PathUnescape(s); return v }},
		{"hex", func(s string) string { return decodeRuns(s, "0123456789abcdefABCDEF", 2, hexDecode) }},
		{"base64", func(s string) string {
			s = strings.NewReplacer("-", "+", "_", "/", `\/`, "/").Replace(s)
			return decodeRuns(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", 4, b64Decode)
		}},
	} {
		if strings.Contains(d.decode(text), inner) {
			return d.name
		}
	}
	return ""
}

// decodeRuns decodes every run of alphabet's characters in s, from each
// offset up to step, and joins what the decodings give.
func decodeRuns(s, alphabet string, step int, decode func(string) string) string {
	var out strings.Builder
	for _, run := range strings.FieldsFunc(s, func(r rune) bool { return !strings.ContainsRune(alphabet, r) }) {
		for off := 0; off < step && off < len(run); off++ {
			r := run[off:]
			if step == 2 || len(r)%4 == 1 { // whole bytes; unpadded base64 may end in a part of a group
				r = r[:len(r)/step*step]
			}
			out.WriteString(decode(r))
			out.WriteByte(0)
		}
	}
	return out.String()
}

func hexDecode(s string) string { b, _ := hex.DecodeString(s); return string(b) }

func b64Decode(s string) string { b, _ := base64.RawStdEncoding.DecodeString(s); return string(b) }

// percentAll escapes every byte of s.
func percentAll(s string) string {
	var b strings.Builder
	for i := range len(s) {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// TestRedactorEncodings is finding 2 of the fourth trust review: a secret,
// and each part a credential registers (basic authentication's password),
// is found however an echo writes it — as it is, in upper or lower case,
// in hex of either case, in base64 of either alphabet, padded or not and
// at any offset in what was encoded, URL-encoded, JSON-escaped, or split
// in halves across two fields — and the placeholder takes its place.
func TestRedactorEncodings(t *testing.T) {
	const login = "ada:Lov3lace-Analytic-Engine"
	const pass = "Lov3lace-Analytic-Engine"
	const key = "sk-live-9f8e7d6c5b4a"
	r := egress.NewRedactor([]secrets.Secret{
		secrets.New("env:KEY", key),
		secrets.New("env:LOGIN", login),
		secrets.New("env:LOGIN", pass), // the part egress.Credentials registers for basic
	})
	b64 := func(enc *base64.Encoding, s string) string { return enc.EncodeToString([]byte(s)) }
	encodings := []struct {
		name   string
		encode func(string) string
		split  int // the length of the first of two parts the value is split in; 0 when it is not
	}{
		{"as it is", func(s string) string { return s }, 0},
		{"upper case", strings.ToUpper, 0},
		{"lower case", strings.ToLower, 0},
		{"hex", func(s string) string { return hex.EncodeToString([]byte(s)) }, 0},
		{"upper-case hex", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }, 0},
		{"base64", func(s string) string { return b64(base64.StdEncoding, s) }, 0},
		{"base64 unpadded", func(s string) string { return b64(base64.RawStdEncoding, s) }, 0},
		{"URL base64", func(s string) string { return b64(base64.URLEncoding, s) }, 0},
		{"URL base64 unpadded", func(s string) string { return b64(base64.RawURLEncoding, s) }, 0},
		{"base64 after one byte", func(s string) string { return b64(base64.StdEncoding, "x"+s) }, 0},
		{"base64 after two bytes", func(s string) string { return b64(base64.StdEncoding, "xy"+s) }, 0},
		{"base64 after a user", func(s string) string { return b64(base64.StdEncoding, "user:"+s) }, 0},
		{"URL base64 after four bytes, unpadded", func(s string) string { return b64(base64.RawURLEncoding, "id=1"+s+"!") }, 0},
		{"base64 in JSON, as PHP escapes it", func(s string) string { return strings.ReplaceAll(b64(base64.StdEncoding, "?>"+s), "/", `\/`) }, 0},
		{"in a query", url.QueryEscape, 0},
		{"in a path", url.PathEscape, 0},
		{"every byte percent-encoded", percentAll, 0},
		{"JSON-escaped", func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }, 0},
		{"split in halves across fields", func(s string) string { return s[:len(s)/2] + `", "rest": "` + s[len(s)/2:] }, 0},
		{"split in halves, the longer first", func(s string) string { return s[:len(s)/2+1] + `", "rest": "` + s[len(s)/2+1:] }, 1},
		{"split in halves, the shorter first", func(s string) string { return s[:len(s)/2-1] + `", "rest": "` + s[len(s)/2-1:] }, -1},
	}
	for _, v := range []struct{ name, value, ref string }{
		{"an API key", key, "env:KEY"},
		{"a basic login", login, "env:LOGIN"},
		{"a basic password on its own", pass, "env:LOGIN"},
	} {
		for _, e := range encodings {
			t.Run(v.name+" "+e.name, func(t *testing.T) {
				text := `{"echo": "` + e.encode(v.value) + `", "n": 1}`
				shown := []string{v.value}
				if strings.HasPrefix(e.name, "split") {
					h := len(v.value)/2 + e.split
					shown = []string{v.value[:h], v.value[h:]}
				}
				got := redactAll(t, r, text)
				for _, s := range shown {
					require.NotEmpty(t, readable(text, s), "the test's decodings read the echo")
					require.Empty(t, readable(got, s), got)
				}
				require.Contains(t, got, "[secret "+v.ref+"]")
				require.True(t, json.Valid([]byte(got)), got)
			})
		}
	}

	// A user name is no secret: it is left alone where the password is
	// not.
	got := r.String(`{"user": "ada", "greeting": "hello ada"}`)
	require.Equal(t, `{"user": "ada", "greeting": "hello ada"}`, got)
}

// fuzzEncodings are the encodings FuzzRedactorEncodings echoes a value
// in; junk says whether bytes around the value are encoded with it.
var fuzzEncodings = []struct {
	name   string
	encode func(string) string
	junk   bool
}{
	{"as it is", func(s string) string { return s }, false},
	{"upper case", strings.ToUpper, false},
	{"lower case", strings.ToLower, false},
	{"hex", func(s string) string { return hex.EncodeToString([]byte(s)) }, true},
	{"upper-case hex", func(s string) string { return strings.ToUpper(hex.EncodeToString([]byte(s))) }, true},
	{"base64", func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }, true},
	{"base64 unpadded", func(s string) string { return base64.RawStdEncoding.EncodeToString([]byte(s)) }, true},
	{"URL base64", func(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }, true},
	{"URL base64 unpadded", func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }, true},
	{"base64 as PHP's JSON", func(s string) string {
		return strings.ReplaceAll(base64.StdEncoding.EncodeToString([]byte(s)), "/", `\/`)
	}, true},
	{"in a query", url.QueryEscape, false},
	{"in a path", url.PathEscape, false},
	{"every byte percent-encoded", percentAll, false},
	{"JSON as Go writes it", func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }, false},
	{"JSON without HTML escapes", func(s string) string {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(s)
		return strings.TrimSuffix(b.String(), "\n")[1 : b.Len()-2]
	}, false},
}

// runePieces reports whether the first and last n bytes of v, cut at
// the edges of v's characters (shorter), are still secrets.MinBytes
// long.
func runePieces(v string, n int) bool {
	end, start := n, len(v)-n
	for end > 0 && !utf8.RuneStart(v[end]) {
		end--
	}
	for start < len(v) && !utf8.RuneStart(v[start]) {
		start++
	}
	return end >= secrets.MinBytes && len(v)-start >= secrets.MinBytes
}

// FuzzRedactorEncodings: a registered value echoed in any encoding the
// redactor claims to catch — at any offset of what was encoded with it,
// or split in halves across two fields — cannot be read back from what
// comes out; streamed in any chunks, the result is the same; nothing
// panics.
func FuzzRedactorEncodings(f *testing.F) {
	f.Add([]byte("Lov3lace-Analytic-Engine"), uint8(0), uint8(0), uint8(5), uint8(7))
	f.Add([]byte("sk-live-9f8e7d6c5b4a"), uint8(2), uint8(1), uint8(9), uint8(1))
	f.Add([]byte(`pa"ss\w/rd<&>é😀+ =`), uint8(1), uint8(2), uint8(13), uint8(3))
	f.Add([]byte("\xff\xfe\x80abcdefgh"), uint8(3), uint8(0), uint8(14), uint8(64))
	f.Add([]byte("0123456789abcdefghij"), uint8(4), uint8(1), uint8(255), uint8(2))
	f.Fuzz(func(t *testing.T, secret []byte, before, after, encoding, chunk uint8) {
		// Keys and passwords, not documents: a streamed value is held back
		// until it is whole, and one of kilobytes read a byte at a time
		// costs the fuzzer's time, not coverage.
		if len(secret) < secrets.MinBytes || len(secret) > 256 {
			return
		}
		value := string(secret)
		r := egress.NewRedactor([]secrets.Secret{secrets.New("env:K", value), secrets.New("env:L", "user:"+value)})
		var text string
		shown := []string{value}
		if int(encoding) >= len(fuzzEncodings) {
			// Split in halves: at the middle, or a byte beside it for an
			// even length.
			n := (len(value) - 1) / 2
			h := n + int(encoding)%(len(value)-2*n+1)
			first, _ := json.Marshal(value[:h]) // as an API that writes JSON splits it
			rest, _ := json.Marshal(value[h:])
			text = `{"echo": ` + string(first) + `, "rest": ` + string(rest) + `}`
			shown = nil
			if n >= secrets.MinBytes && runePieces(value, n) {
				shown = []string{value[:h], value[h:]}
			}
		} else {
			e := fuzzEncodings[encoding]
			echoed := value
			if e.junk {
				// Bytes that shift the value's offset in what is encoded
				// (no \x00, which decodeRuns joins with).
				echoed = "\x01\x02\x03\x04"[:before%5] + value + "\xfe\xff"[:after%3]
			}
			text = `{"echo": "` + e.encode(echoed) + `"}`
			if strings.HasPrefix(e.name, "upper") || strings.HasPrefix(e.name, "lower") {
				shown = []string{e.encode(value)}
			}
		}

		got := r.String(text)
		streamed, err := io.ReadAll(r.Reader(&chunked{src: []byte(text), n: int(chunk%64) + 1}))
		require.NoError(t, err)
		require.Equal(t, got, string(streamed))
		// A value JSON writes as it is leaves a document one. Of another
		// (a quote, a backslash, a character written as \u00XX) the
		// placeholder may take a document's own quote or cut an escape,
		// which the tool registry then refuses to pass on.
		if quoted, _ := json.Marshal(value); json.Valid([]byte(text)) && string(quoted) == `"`+value+`"` {
			require.True(t, json.Valid([]byte(got)), "a JSON document stays one: %s", got)
		}

		for _, s := range shown {
			inner := strings.ToLower(s[1 : len(s)-1])
			if len(s) < 8 || strings.ContainsAny(inner, "[]{}\"\x00") || strings.Contains("secret env:k secret env:l echo rest", inner) {
				continue // the placeholder and the document around it could read as the value
			}
			if readable(text, s) == "" {
				continue // the test's decodings do not read it either
			}
			require.Empty(t, readable(got, s), "%q in %s", s, got)
		}
	})
}

// BenchmarkRedactor: a megabyte of JSON that holds no value, redacted
// with a basic login and its password registered, at once and streamed.
func BenchmarkRedactor(b *testing.B) {
	r := egress.NewRedactor([]secrets.Secret{
		secrets.New("env:LOGIN", "ada:Lov3lace-Analytic-Engine"), secrets.New("env:LOGIN", "Lov3lace-Analytic-Engine"),
		secrets.New("env:KEY", "sk-live-9f8e7d6c5b4a3210"),
	})
	var doc bytes.Buffer
	for i := 0; doc.Len() < 1<<20; i++ {
		fmt.Fprintf(&doc, `{"id": %d, "name": "Customer %d", "email": "customer%d@example.com", "note": "SGVsbG8gd29ybGQ= 0a1b2c3d4e5f"},`, i, i, i)
	}
	text := doc.Bytes()
	b.SetBytes(int64(len(text)))
	b.Run("bytes", func(b *testing.B) {
		for b.Loop() {
			_ = r.Bytes(text)
		}
	})
	b.Run("reader", func(b *testing.B) {
		for b.Loop() {
			_, _ = io.Copy(io.Discard, r.Reader(bytes.NewReader(text)))
		}
	})
}
