package guard

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// PII kinds the redactor knows; a custom pattern adds a kind of its own.
const (
	KindEmail  = "email"
	KindPhone  = "phone"
	KindCard   = "card"   // payment card numbers that pass the Luhn check
	KindIBAN   = "iban"   // IBANs that pass the mod-97 check
	KindSSN    = "ssn"    // US social security numbers
	KindSecret = "secret" // API keys and tokens by their shape
)

// Kinds lists the built-in kinds, in the order they are looked for: a
// span two kinds find is the first's.
func Kinds() []string { return []string{KindSecret, KindEmail, KindIBAN, KindCard, KindSSN, KindPhone} }

// Redaction modes.
const (
	// ModeMask replaces a value with its kind: "[email]".
	ModeMask = "mask"
	// ModeHash replaces a value with its kind and a keyed hash, the same
	// for the same value: "[email:3f9a0c1d]", so that the model can tell
	// two values apart without reading either.
	ModeHash = "hash"
	// ModePlaceholder replaces a value with a numbered placeholder,
	// "[EMAIL_1]", the same for the same value within a turn, which the
	// turn's vault maps back to the value for the tools allowed to read
	// it.
	ModePlaceholder = "placeholder"
)

// Pattern is a custom kind: a name and an RE2 expression.
type Pattern struct {
	Name  string `json:"name"`
	Regex string `json:"regex"`
}

// Config says what a redactor looks for and how it replaces it.
type Config struct {
	// Kinds are the built-in kinds to find; empty: all of them.
	Kinds []string `json:"kinds,omitempty"`
	// Custom adds kinds of the tenant's own.
	Custom []Pattern `json:"custom,omitempty"`
	// Mode is mask (default), hash or placeholder.
	Mode string `json:"mode,omitempty"`
	// Reveal names the tools whose arguments get the real values back
	// from the vault (placeholder mode only).
	Reveal []string `json:"reveal,omitempty"`
}

var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// Validate checks a config and says which field is wrong.
func (c Config) Validate() error {
	for i, k := range c.Kinds {
		if !slices.Contains(Kinds(), k) {
			return fmt.Errorf("kinds[%d]: %q is not a kind; want one of %s (or a custom pattern)", i, k, strings.Join(Kinds(), ", "))
		}
		if slices.Contains(c.Kinds[:i], k) {
			return fmt.Errorf("kinds[%d]: %q is listed twice", i, k)
		}
	}
	for i, p := range c.Custom {
		switch {
		case !kindName.MatchString(p.Name):
			return fmt.Errorf("custom[%d].name %q: want a lowercase letter, then lowercase letters, digits or '_', at most 32", i, p.Name)
		case slices.Contains(Kinds(), p.Name):
			return fmt.Errorf("custom[%d].name %q is a built-in kind", i, p.Name)
		case strings.TrimSpace(p.Regex) == "":
			return fmt.Errorf("custom[%d].regex is required", i)
		}
		re, err := regexp.Compile(p.Regex)
		if err != nil {
			return fmt.Errorf("custom[%d].regex: %v", i, err)
		}
		if re.MatchString("") {
			return fmt.Errorf("custom[%d].regex %q matches the empty text", i, p.Regex)
		}
		for _, q := range c.Custom[:i] {
			if q.Name == p.Name {
				return fmt.Errorf("custom[%d].name %q is used twice", i, p.Name)
			}
		}
	}
	switch c.Mode {
	case "", ModeMask, ModeHash, ModePlaceholder:
	default:
		return fmt.Errorf("mode %q: want %s, %s or %s", c.Mode, ModeMask, ModeHash, ModePlaceholder)
	}
	if len(c.Reveal) > 0 && c.Mode != ModePlaceholder {
		return fmt.Errorf("reveal needs mode %s: only a placeholder can be mapped back to its value", ModePlaceholder)
	}
	return nil
}

// Redactor finds PII in text and replaces it. It is safe for concurrent
// use; a Vault is one turn's.
type Redactor struct {
	mode      string
	hashKey   []byte
	detectors []detector
}

type detector struct {
	kind  string
	re    *regexp.Regexp
	valid func(string) bool // nil: every match
	// may, when set, reports cheaply whether the text can hold a match
	// at all, so that the expression need not run.
	may func(string) bool
}

// digits counts the ASCII digits of s, up to n.
func digits(s string, n int) int {
	c := 0
	for i := 0; i < len(s) && c < n; i++ {
		if s[i] >= '0' && s[i] <= '9' {
			c++
		}
	}
	return c
}

func atLeastDigits(n int) func(string) bool {
	return func(s string) bool { return digits(s, n) >= n }
}

var builtin = map[string]detector{
	KindEmail: {KindEmail, regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`), nil,
		func(s string) bool { return strings.Contains(s, "@") }},
	KindPhone: {KindPhone, regexp.MustCompile(`\+?\(?\d[\d ()./-]{7,18}\d`), phoneLike, atLeastDigits(9)},
	KindCard:  {KindCard, regexp.MustCompile(`\b\d(?:[ -]?\d){12,18}\b`), luhn, atLeastDigits(13)},
	KindIBAN:  {KindIBAN, regexp.MustCompile(`\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b`), ibanValid, atLeastDigits(4)},
	KindSSN: {KindSSN, regexp.MustCompile(`\b(?:00[1-9]|0[1-9]\d|[1-5]\d\d|6[0-57-9]\d|66[0-57-9]|7[0-6]\d|77[0-2])-(?:0[1-9]|[1-9]\d)-(?:000[1-9]|00[1-9]\d|0[1-9]\d\d|[1-9]\d{3})\b`), nil,
		func(s string) bool { return digits(s, 9) >= 9 && strings.Contains(s, "-") }},
	KindSecret: {KindSecret, regexp.MustCompile(`\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36,}|xox[baprs]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})`),
		nil, func(s string) bool {
			for _, p := range []string{"sk-", "AKIA", "gh", "xox", "AIza", "eyJ"} {
				if strings.Contains(s, p) {
					return true
				}
			}
			return false
		}},
}

// New returns the redactor of a config (which must validate). hashKey
// keys ModeHash's hashes, so that a hash cannot be reversed by hashing
// guesses without the key; the operator's vault key is a good one.
func New(c Config, hashKey []byte) (*Redactor, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Redactor{mode: c.Mode, hashKey: hashKey}
	r.mode = cmp.Or(r.mode, ModeMask)
	for _, k := range Kinds() {
		if len(c.Kinds) == 0 || slices.Contains(c.Kinds, k) {
			r.detectors = append(r.detectors, builtin[k])
		}
	}
	for _, p := range c.Custom {
		r.detectors = append(r.detectors, detector{kind: p.Name, re: regexp.MustCompile(p.Regex)})
	}
	return r, nil
}

// Finding is a value found: its kind and where it was. Findings are
// counted; their values are never logged.
type Finding struct {
	Kind       string
	Start, End int
}

// Find returns what the redactor finds in text, in order, without
// overlaps: where two spans overlap, the earlier (then the longer, then
// the kind looked for first) is kept.
func (r *Redactor) Find(text string) []Finding {
	var all []Finding
	for _, d := range r.detectors {
		if d.may != nil && !d.may(text) {
			continue
		}
		for _, m := range d.re.FindAllStringIndex(text, -1) {
			if d.valid != nil && !d.valid(text[m[0]:m[1]]) {
				continue
			}
			all = append(all, Finding{Kind: d.kind, Start: m[0], End: m[1]})
		}
	}
	order := map[string]int{}
	for i, d := range r.detectors {
		order[d.kind] = i
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Start != b.Start {
			return a.Start < b.Start
		}
		if a.End-a.Start != b.End-b.Start {
			return a.End-a.Start > b.End-b.Start
		}
		return order[a.Kind] < order[b.Kind]
	})
	var out []Finding
	for _, f := range all {
		if len(out) > 0 && f.Start < out[len(out)-1].End {
			continue
		}
		out = append(out, f)
	}
	return out
}

// maxPasses bounds Redact's passes: a value that overlapped a longer one
// can be left whole beside its replacement, and is found by the next.
const maxPasses = 4

// Redact replaces what the redactor finds in text, pass after pass until
// nothing is found. In placeholder mode the placeholders are v's (nil: a
// vault of this call only). It returns the text and what was found.
func (r *Redactor) Redact(text string, v *Vault) (string, []Finding) {
	if v == nil {
		v = NewVault()
	}
	var all []Finding
	for range maxPasses {
		out, found, again := r.redactOnce(text, v)
		text, all = out, append(all, found...)
		if !again {
			break
		}
	}
	return text, all
}

// redactOnce is one pass; again says it replaced something, so that the
// next pass may find more.
func (r *Redactor) redactOnce(text string, v *Vault) (string, []Finding, bool) {
	found := r.Find(text)
	if len(found) == 0 {
		return text, nil, false
	}
	var b strings.Builder
	last := 0
	for _, f := range found {
		b.WriteString(text[last:f.Start])
		b.WriteString(r.replacement(f.Kind, text[f.Start:f.End], v))
		last = f.End
	}
	b.WriteString(text[last:])
	// A value can be left beside one replaced: one that overlapped it, or
	// one whose digits ran into it (a phone number after a card number).
	return b.String(), found, true
}

func (r *Redactor) replacement(kind, value string, v *Vault) string {
	switch r.mode {
	case ModeHash:
		m := hmac.New(sha256.New, r.hashKey)
		m.Write([]byte(kind + "\x00" + value))
		return "[" + kind + ":" + hex.EncodeToString(m.Sum(nil))[:8] + "]"
	case ModePlaceholder:
		return v.placeholder(kind, value)
	}
	return "[" + kind + "]"
}

// Vault maps a turn's placeholders to the values they stand for. It is
// not safe for concurrent use.
type Vault struct {
	byValue map[string]string // kind + value → placeholder
	values  map[string]string // placeholder → value
	counts  map[string]int
}

// NewVault returns an empty vault.
func NewVault() *Vault {
	return &Vault{byValue: map[string]string{}, values: map[string]string{}, counts: map[string]int{}}
}

func (v *Vault) placeholder(kind, value string) string {
	key := kind + "\x00" + value
	if p, ok := v.byValue[key]; ok {
		return p
	}
	v.counts[kind]++
	p := fmt.Sprintf("[%s_%d]", strings.ToUpper(kind), v.counts[kind])
	v.byValue[key], v.values[p] = p, value
	return p
}

// Put adds a placeholder's value (one read back from storage).
func (v *Vault) Put(placeholder, value string) {
	v.values[placeholder] = value
	kind, n, ok := parsePlaceholder(placeholder)
	if !ok {
		return
	}
	key := strings.ToLower(kind) + "\x00" + value
	v.byValue[key] = placeholder
	v.counts[strings.ToLower(kind)] = max(v.counts[strings.ToLower(kind)], n)
}

// Entries returns the vault's placeholders and values.
func (v *Vault) Entries() map[string]string {
	return maps.Clone(v.values)
}

var placeholderRE = regexp.MustCompile(`\[([A-Z][A-Z0-9_]*)_(\d+)\]`)

func parsePlaceholder(p string) (string, int, bool) {
	m := placeholderRE.FindStringSubmatch(p)
	if m == nil || m[0] != p {
		return "", 0, false
	}
	n := 0
	fmt.Sscanf(m[2], "%d", &n)
	return m[1], n, true
}

// Reveal replaces the vault's placeholders in text with their values;
// placeholders it does not hold stay as they are.
func (v *Vault) Reveal(text string) string {
	return placeholderRE.ReplaceAllStringFunc(text, func(p string) string {
		if val, ok := v.values[p]; ok {
			return val
		}
		return p
	})
}

// luhn reports whether a run of digits (spaces and dashes between them)
// passes the Luhn check, as card numbers do.
func luhn(s string) bool {
	var digits []int
	for _, c := range s {
		if unicode.IsDigit(c) {
			digits = append(digits, int(c-'0'))
		}
	}
	if len(digits) < 13 || len(digits) > 19 {
		return false
	}
	sum := 0
	for i := range digits {
		d := digits[len(digits)-1-i]
		if i%2 == 1 {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
	}
	return sum%10 == 0
}

// ibanValid reports whether s (spaces allowed) passes the IBAN mod-97
// check.
func ibanValid(s string) bool {
	s = strings.ReplaceAll(s, " ", "")
	if len(s) < 15 || len(s) > 34 {
		return false
	}
	var b strings.Builder
	for _, c := range s[4:] + s[:4] {
		switch {
		case c >= '0' && c <= '9':
			b.WriteRune(c)
		case c >= 'A' && c <= 'Z':
			fmt.Fprintf(&b, "%d", c-'A'+10)
		default:
			return false
		}
	}
	n, ok := new(big.Int).SetString(b.String(), 10)
	return ok && new(big.Int).Mod(n, big.NewInt(97)).Int64() == 1
}

// phoneLike reports whether a match has the digits of a phone number:
// 9 to 15 of them (shorter runs are amounts, dates and codes), and not
// the look of a decimal number or a date.
func phoneLike(s string) bool {
	n := 0
	for _, c := range s {
		if unicode.IsDigit(c) {
			n++
		}
	}
	if n < 9 || n > 15 {
		return false
	}
	return !strings.Contains(s, ".") || strings.Count(s, ".") >= 2
}
