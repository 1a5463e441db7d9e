package egress

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
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
// resolved and every part of one a credential sent apart (Credential's
// parts: basic authentication's password).
//
// Each value, and the first and last (n-1)/2 bytes of a value of n bytes
// when they are at least secrets.MinBytes long (an echo that splits it in
// halves across two fields: each half less the byte or two at the cut;
// cut at the edges of its characters too), is looked for in the forms an
// echo may give it:
//
//   - as it is, and in upper or lower case: every form is matched without
//     regard to the case of ASCII letters, and a value's upper and lower
//     case beyond ASCII are forms of their own;
//   - as a JSON string holds it: escaped plainly, with <, > and & escaped
//     as Go does, with non-ASCII characters as \u escapes as Python does,
//     with / as \/ as PHP does (in every form below too);
//   - URL-encoded: as a query holds it, as a path holds it, with only the
//     unreserved characters of RFC 3986 left as they are, as
//     encodeURIComponent leaves them, and with every byte escaped;
//   - in hex, of either case;
//   - in base64, standard and URL alphabets, padded or not: the value
//     encoded on its own, and the characters that hold its bits alone
//     wherever it starts in what was encoded (at an offset of 0, 1 or 2
//     bytes modulo 3, so "user:" + value as basic authentication sends it
//     is found too). The one or two characters at either end that also
//     hold bits of what is next to the value are left: they carry less
//     than a byte of it.
//
// Every occurrence becomes the secret's placeholder, "[secret env:NAME]",
// which keeps a JSON string a JSON string and names what was there. Where
// occurrences overlap, the leftmost, then the longest, is replaced. A
// value that JSON does not write as it is (one with a quote, a backslash
// or a control character) is looked for as it is too, and may then take a
// document's own quote, or part of an escape, with it: the document is
// broken, never the value kept, and the tool registry refuses to pass
// such data on.
//
// Values shorter than secrets.MinBytes are not looked for: they would be
// found by chance in ordinary text and garble it. secrets.Recording, which
// every tool resolves through, refuses them, and Credentials a part that
// short (a basic password of "admin1").
//
// A nil or empty Redactor changes nothing. A Redactor is safe for
// concurrent use.
type Redactor struct {
	pats []pattern
	// byStart indexes pats by their first minPattern bytes, and filter
	// rules out most starts that begin none: the scan looks at every byte.
	byStart map[uint64][]int
	filter  *[filterBits / 64]uint64
}

// minPattern is the length of every form looked for, at least: the
// shortest form of the shortest value (a base64 run of secrets.MinBytes
// bytes is ten characters).
const minPattern = 8

// filterBits is the size of Redactor.filter.
const filterBits = 1 << 16

// pattern is one form of one secret's value, its ASCII letters in lower
// case, and what replaces it.
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
	r := &Redactor{byStart: map[uint64][]int{}, filter: new([filterBits / 64]uint64)}
	seen := map[string]bool{}
	for _, s := range list {
		v := s.Reveal()
		if len(v) < secrets.MinBytes {
			continue
		}
		repl := []byte(s.String())
		for _, piece := range pieces(v) {
			for _, f := range forms(piece) {
				find := foldASCII([]byte(f))
				if len(find) < minPattern || seen[string(find)] {
					continue
				}
				seen[string(find)] = true
				start := startOf(find)
				r.byStart[start] = append(r.byStart[start], len(r.pats))
				r.filter[filterSlot(start)/64] |= 1 << (filterSlot(start) % 64)
				r.pats = append(r.pats, newPattern(find, repl))
			}
		}
	}
	return r
}

// pieces are v and, when they are at least secrets.MinBytes long, its
// first and last (len(v)-1)/2 bytes: what an echo that splits v in halves
// across two fields, at its middle or a byte beside it, shows in each,
// less the byte or two at the cut. A JSON writer escapes each half's
// characters, and a piece cut inside a character would be escaped as
// U+FFFD where the half holds the character whole: so the pieces are
// also cut at the characters' edges, shorter, when they are still long
// enough.
func pieces(v string) []string {
	out := []string{v}
	n := (len(v) - 1) / 2
	if n < secrets.MinBytes {
		return out
	}
	out = append(out, v[:n], v[len(v)-n:])
	end, start := n, len(v)-n
	for end > 0 && !utf8.RuneStart(v[end]) {
		end--
	}
	for start < len(v) && !utf8.RuneStart(v[start]) {
		start++
	}
	if end != n && end >= secrets.MinBytes {
		out = append(out, v[:end])
	}
	if start != len(v)-n && len(v)-start >= secrets.MinBytes {
		out = append(out, v[start:])
	}
	return out
}

// forms are the ways an echo may write v (see Redactor).
func forms(v string) []string {
	plain := jsonEscape(v)
	html, _ := json.Marshal(v) // a string always marshals
	ascii := asciiJSON(plain)
	out := []string{
		v,
		strings.ToUpper(v),
		strings.ToLower(v),
		plain,
		string(html[1 : len(html)-1]),
		ascii,
		url.QueryEscape(v),
		url.PathEscape(v),
		percentEscape(v, unreserved),
		percentEscape(v, func(c byte) bool { return unreserved(c) || strings.IndexByte("!'()*", c) >= 0 }),
		percentEscape(v, func(byte) bool { return false }),
		hex.EncodeToString([]byte(v)),
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)), enc.WithPadding(base64.NoPadding).EncodeToString([]byte(v)))
		for offset := range 3 {
			out = append(out, base64Run(enc, v, offset))
		}
	}
	// PHP's json_encode writes / as \/, in whatever form holds one.
	for _, f := range out {
		if strings.Contains(f, "/") {
			out = append(out, strings.ReplaceAll(f, "/", `\/`))
		}
	}
	return out
}

// base64Run is the part of the base64 of a text, holding v at offset
// (modulo 3) bytes, that v's bits alone decide, whatever comes before and
// after it: its characters from the first that starts within v to the
// last that ends within it.
func base64Run(enc *base64.Encoding, v string, offset int) string {
	buf := make([]byte, offset+len(v))
	copy(buf[offset:], v)
	s := enc.WithPadding(base64.NoPadding).EncodeToString(buf)
	from, to := (8*offset+5)/6, 8*(offset+len(v))/6
	return s[from:to]
}

// percentEscape is v with every byte but those it keeps written as %XX.
func percentEscape(v string, keep func(byte) bool) string {
	var b strings.Builder
	for i := range len(v) {
		c := v[i]
		if keep(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// unreserved reports whether RFC 3986 leaves c as it is in a URL.
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
}

// jsonEscape is v as the inside of a JSON string, escaping only what JSON
// requires (and what encoding/json always escapes besides).
func jsonEscape(v string) string {
	b, _ := agent.MarshalPlain(v) // a string always encodes
	return string(b[1 : len(b)-1])
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

// foldASCII returns b with its ASCII letters in lower case, in place: the
// same length, so that positions in it are positions in b.
func foldASCII(b []byte) []byte {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
	return b
}

// startOf is the first minPattern bytes of b as a number.
func startOf(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

// filterSlot hashes a start to a bit of Redactor.filter.
func filterSlot(start uint64) uint64 { return (start * 0x9E3779B97F4A7C15) >> (64 - 16) }

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
	folded := foldASCII(bytes.Clone(src))
	hold := len(src)
	if !final {
		hold = r.partialStart(folded)
	}
	found := false
	done := 0 // src[:done] is in dst
	for i := 0; i < hold && i+minPattern <= len(src); {
		start := startOf(folded[i:])
		slot := filterSlot(start)
		if r.filter[slot/64]&(1<<(slot%64)) == 0 {
			i++ // the common case, kept to a few instructions
			continue
		}
		j := r.longestAt(folded[i:], start)
		if j < 0 {
			i++
			continue
		}
		found = true
		dst = append(dst, src[done:i]...)
		dst = append(dst, r.pats[j].repl...)
		i += len(r.pats[j].find)
		done = i
	}
	if done < hold {
		dst = append(dst, src[done:hold]...)
		done = hold
	}
	return dst, done, found
}

// longestAt is the index of the longest pattern at the start of folded,
// whose first minPattern bytes are start; -1 for none.
func (r *Redactor) longestAt(folded []byte, start uint64) int {
	best := -1
	for _, j := range r.byStart[start] {
		if bytes.HasPrefix(folded, r.pats[j].find) && (best < 0 || len(r.pats[j].find) > len(r.pats[best].find)) {
			best = j
		}
	}
	return best
}

// partialStart is the first position of folded from which the rest is the
// start of some form, which more bytes may complete; len(folded) when
// there is none.
func (r *Redactor) partialStart(folded []byte) int {
	longest := 0
	for i := range r.pats {
		longest = max(longest, r.pats[i].partial(folded))
	}
	return len(folded) - longest
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
