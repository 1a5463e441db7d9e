package egress_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
	"time"

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
		{"a start that never completes", "sk-live-01234 sk-live-012345678", "sk-live-01234 sk-live-012345678"},
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
