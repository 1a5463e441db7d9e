package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/secrets"
)

// Redactor removes the values of secrets from what a tool got back:
// response bodies as they stream in, response headers, error messages, and
// a tool's output. It is the one redactor of every tool kind: Credentials
// applies it to the answers of the requests they were attached to, and the
// tool registry to every call's output, with every secret the call
// resolved.
//
// Each value is looked for in the forms an echo may give it: as it is; as
// a JSON string holds it (escaped plainly, with <, > and & escaped as Go
// does, with non-ASCII characters as \u escapes as Python does, with / as
// \/ as PHP does); URL-encoded, as a query or a path holds it; and in
// base64, as HTTP basic authentication sends it. Every occurrence becomes
// the secret's placeholder, "[secret env:NAME]", which keeps a JSON string
// a JSON string and names what was there. Where occurrences overlap, the
// leftmost, then the longest, is replaced.
//
// Values shorter than secrets.MinBytes are not looked for: they would be
// found by chance in ordinary text and garble it. secrets.Recording, which
// every tool resolves through, refuses them.
//
// A nil or empty Redactor changes nothing. A Redactor is safe for
// concurrent use.
type Redactor struct {
	pats []pattern
}

// pattern is one form of one secret's value and what replaces it.
type pattern struct {
	find, repl []byte
	// fail[i] is the length of the longest proper prefix of find[:i+1]
	// that is also its suffix (Knuth-Morris-Pratt).
	fail []int
}

func newPattern(find, repl []byte) pattern {
	fail := make([]int, len(find))
	k := 0
	for i := 1; i < len(find); i++ {
		for k > 0 && find[i] != find[k] {
			k = fail[k-1]
		}
		if find[i] == find[k] {
			k++
		}
		fail[i] = k
	}
	return pattern{find: find, repl: repl, fail: fail}
}

// partial is the length of the longest suffix of s that is a proper
// prefix of find: in time linear in len(s), whatever s holds.
func (p *pattern) partial(s []byte) int {
	if n := len(p.find) - 1; len(s) > n {
		s = s[len(s)-n:] // a longer suffix cannot be a proper prefix
	}
	k := 0
	for _, c := range s {
		for k > 0 && (k == len(p.find) || p.find[k] != c) {
			k = p.fail[k-1]
		}
		if p.find[k] == c {
			k++
		}
	}
	if k == len(p.find) {
		k = p.fail[k-1]
	}
	return k
}

// NewRedactor returns a redactor of the given secrets' values.
func NewRedactor(list []secrets.Secret) *Redactor {
	r := &Redactor{}
	seen := map[string]bool{}
	for _, s := range list {
		v := s.Reveal()
		if len(v) < secrets.MinBytes {
			continue
		}
		repl := []byte(s.String())
		for _, f := range forms(v) {
			if seen[f] {
				continue
			}
			seen[f] = true
			r.pats = append(r.pats, newPattern([]byte(f), repl))
		}
	}
	return r
}

// forms are the ways an echo may write v.
func forms(v string) []string {
	plain := jsonEscape(v)
	html, _ := json.Marshal(v) // a string always marshals
	ascii := asciiJSON(plain)
	return []string{
		v,
		plain,
		string(html[1 : len(html)-1]),
		ascii,
		strings.ReplaceAll(plain, "/", `\/`),
		strings.ReplaceAll(ascii, "/", `\/`), // PHP's json_encode escapes both
		url.QueryEscape(v),
		url.PathEscape(v),
		base64.StdEncoding.EncodeToString([]byte(v)),
	}
}

// jsonEscape is v as the inside of a JSON string, escaping only what JSON
// requires (and what encoding/json always escapes besides).
func jsonEscape(v string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // a string always encodes
	s := strings.TrimSuffix(b.String(), "\n")
	return s[1 : len(s)-1]
}

// asciiJSON writes the non-ASCII characters of a JSON string's inside as
// \u escapes, surrogate pairs beyond the basic plane.
func asciiJSON(s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case c < utf8.RuneSelf:
			b.WriteRune(c)
		case c > 0xFFFF:
			c -= 0x10000
			fmt.Fprintf(&b, `\u%04x\u%04x`, 0xD800+(c>>10), 0xDC00+(c&0x3FF))
		default:
			fmt.Fprintf(&b, `\u%04x`, c)
		}
	}
	return b.String()
}

// Empty reports whether r looks for nothing.
func (r *Redactor) Empty() bool { return r == nil || len(r.pats) == 0 }

// Bytes returns b with every value replaced; b itself when it holds none.
func (r *Redactor) Bytes(b []byte) []byte {
	if r.Empty() {
		return b
	}
	out, _, found := r.scan(nil, b, true)
	if !found {
		return b
	}
	return out
}

// String returns s with every value replaced.
func (r *Redactor) String(s string) string {
	if r.Empty() {
		return s
	}
	out, _, found := r.scan(nil, []byte(s), true)
	if !found {
		return s
	}
	return string(out)
}

// scan appends to dst the redacted form of src, up to where a value that
// may continue past src's end could start (all of src when final), and
// returns dst, how many bytes of src it used, and whether it replaced
// anything.
//
// A value found at p is replaced only when p is before that point: then
// every longer form that could start at p, and every value that could
// start before p, is known to be there or not.
func (r *Redactor) scan(dst, src []byte, final bool) ([]byte, int, bool) {
	hold := len(src)
	if !final {
		hold = r.partialStart(src)
	}
	// next[j] is where pats[j] is next found at or after i: -2 not looked
	// for yet, -1 nowhere.
	next := make([]int, len(r.pats))
	for j := range next {
		next[j] = -2
	}
	found := false
	i := 0
	for {
		best, at := -1, -1
		for j, p := range r.pats {
			if next[j] == -1 {
				continue
			}
			if next[j] < i { // not looked for yet, or inside a value replaced since
				k := bytes.Index(src[i:], p.find)
				if k < 0 {
					next[j] = -1
					continue
				}
				next[j] = i + k
			}
			if best < 0 || next[j] < at || next[j] == at && len(p.find) > len(r.pats[best].find) {
				best, at = j, next[j]
			}
		}
		if best < 0 || at >= hold {
			break
		}
		found = true
		dst = append(dst, src[i:at]...)
		dst = append(dst, r.pats[best].repl...)
		i = at + len(r.pats[best].find)
	}
	if i < hold {
		dst = append(dst, src[i:hold]...)
		i = hold
	}
	return dst, i, found
}

// partialStart is the first position of src from which the rest of src is
// the start of some form, which more bytes may complete; len(src) when
// there is none.
func (r *Redactor) partialStart(src []byte) int {
	longest := 0
	for i := range r.pats {
		longest = max(longest, r.pats[i].partial(src))
	}
	return len(src) - longest
}

// Reader returns src with every value replaced as it streams. A value
// split across reads is found; bytes are held back only while they may be
// the start of one, so that a stream of events (server-sent events, an MCP
// server's progress) is not delayed. A read error other than io.EOF drops
// what was held back: a body cut short never shows the start of a value.
// Closing the reader closes src when it is an io.Closer.
func (r *Redactor) Reader(src io.Reader) io.ReadCloser {
	if r.Empty() {
		if rc, ok := src.(io.ReadCloser); ok {
			return rc
		}
		return io.NopCloser(src)
	}
	return &redactingReader{r: r, src: src}
}

type redactingReader struct {
	r   *Redactor
	src io.Reader
	in  []byte // read from src, not yet scanned: what may start a value
	out []byte // scanned, not yet read
	buf []byte
	err error // src's, returned once out is read
}

func (x *redactingReader) Read(p []byte) (int, error) {
	for len(x.out) == 0 {
		if x.err != nil {
			return 0, x.err
		}
		if x.buf == nil {
			x.buf = make([]byte, 32<<10)
		}
		n, err := x.src.Read(x.buf)
		x.in = append(x.in, x.buf[:n]...)
		switch {
		case err == io.EOF:
			x.err = err
			x.out, _, _ = x.r.scan(x.out[:0], x.in, true)
			x.in = x.in[:0]
		case err != nil:
			x.err = err
			x.out, _, _ = x.r.scan(x.out[:0], x.in, false)
			x.in = nil // may be the start of a value: dropped
		default:
			var used int
			x.out, used, _ = x.r.scan(x.out[:0], x.in, false)
			x.in = append(x.in[:0], x.in[used:]...)
		}
	}
	n := copy(p, x.out)
	x.out = x.out[n:]
	return n, nil
}

func (x *redactingReader) Close() error {
	if c, ok := x.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Error returns err with every value replaced in its message; err itself
// when its message holds none. The result keeps err's chain for errors.Is
// and errors.As, but errors.As to an *agent.Error gets a copy whose message
// is redacted too: an agent error's message is what callers show.
func (r *Redactor) Error(err error) error {
	if err == nil || r.Empty() {
		return err
	}
	msg := err.Error()
	red := r.String(msg)
	if red == msg {
		return err
	}
	return &redactedError{msg: red, err: err, r: r}
}

type redactedError struct {
	msg string
	err error
	r   *Redactor
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func (e *redactedError) As(target any) bool {
	t, ok := target.(**agent.Error)
	if !ok {
		return false
	}
	var ae *agent.Error
	if !errors.As(e.err, &ae) {
		return false
	}
	*t = &agent.Error{Code: ae.Code, Message: e.r.String(ae.Error()), RetryAfter: ae.RetryAfter}
	return true
}
