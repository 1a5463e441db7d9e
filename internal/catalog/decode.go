package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/process"
)

// The document structs in loader.go decode with loader.decode below: a
// struct from a mapping by its fields' yaml tags, reporting unknown and
// repeated keys; a slice from a list; and each leaf value by its own type
// (text, whole, count, …), which checks and reports it. Nothing stops at
// a problem: each is reported, with its file, line and field, and the
// value left at zero.

// pos is where a value was written. A field left out of a mapping is
// placed at the mapping, where it is missing.
type pos struct {
	file  string
	line  int
	field string // e.g. "agents[0].model"
}

func (p pos) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

// on is p moved to n's line: a value is reported where it was defined,
// which for an alias is at its anchor.
func (p pos) on(n *yaml.Node) pos {
	p.line = n.Line
	return p
}

func (p *pos) place(at pos) { *p = at }

// leaf is a field type that reads its own node. place is called for every
// leaf of a decoded mapping; decode only for those the mapping has, with
// the node resolved and null included.
type leaf interface {
	place(at pos)
	decode(l *loader, n *yaml.Node)
}

// flawed is embedded in a struct that needs to know whether decoding
// reported one of its values.
type flawed struct{ bad bool }

func (f *flawed) flaw() { f.bad = true }

// decode reads n, written at at, into v: a leaf, a struct, a pointer to
// one (nil when n is null) or a slice. It reports false when n is the
// wrong shape for a struct, to leave the item out.
func (l *loader) decode(n *yaml.Node, v reflect.Value, at pos) bool {
	r := resolve(n)
	if f, ok := v.Addr().Interface().(leaf); ok {
		f.place(at)
		f.decode(l, r)
		return true
	}
	switch v.Kind() {
	case reflect.Pointer:
		if isNull(r) {
			return true
		}
		v.Set(reflect.New(v.Type().Elem()))
		return l.decode(n, v.Elem(), at)
	case reflect.Slice:
		return l.list(r, v, at)
	case reflect.Struct:
		return l.mapping(r, v, at)
	}
	panic("catalog: cannot decode into " + v.Type().String())
}

// list reads a sequence; null is an empty list.
func (l *loader) list(n *yaml.Node, v reflect.Value, at pos) bool {
	if isNull(n) {
		v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		return true
	}
	if n.Kind != yaml.SequenceNode {
		l.wrong(at, n, "a list")
		return false
	}
	items := reflect.MakeSlice(v.Type(), 0, len(n.Content))
	for i, item := range n.Content {
		e := reflect.New(v.Type().Elem()).Elem()
		if l.decode(item, e, pos{at.file, item.Line, fmt.Sprintf("%s[%d]", at.field, i)}) {
			items = reflect.Append(items, e)
		}
	}
	v.Set(items)
	return true
}

// mapping reads a mapping into the struct v by its fields' yaml tags: the
// keys first, reporting unknown and repeated ones, then the fields in the
// struct's order.
func (l *loader) mapping(n *yaml.Node, v reflect.Value, at pos) bool {
	var keys []string
	for i := range v.NumField() {
		if key := v.Type().Field(i).Tag.Get("yaml"); key != "" {
			keys = append(keys, key)
		}
	}
	if n.Kind != yaml.MappingNode {
		l.wrong(at, n, "a mapping with "+strings.Join(keys, ", "))
		return false
	}
	values := map[string]*yaml.Node{}
	seen := map[string]int{} // key → line
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		kp := pos{at.file, k.Line, join(at.field, k.Value)}
		if first, dup := seen[k.Value]; dup {
			l.addf(kp, "is repeated (first at line %d)", first)
			continue
		}
		seen[k.Value] = k.Line
		if k.Kind != yaml.ScalarNode || !slices.Contains(keys, k.Value) {
			l.addf(kp, "unknown field; known fields: %s", strings.Join(keys, ", "))
			continue
		}
		values[k.Value] = n.Content[i+1]
	}
	flawed := false
	for i := range v.NumField() {
		key := v.Type().Field(i).Tag.Get("yaml")
		if key == "" {
			continue
		}
		fp := pos{at.file, at.line, join(at.field, key)}
		val, written := values[key]
		if !written {
			if f, ok := v.Field(i).Addr().Interface().(leaf); ok {
				f.place(fp) // where it is missing
			}
			continue
		}
		before := len(l.problems)
		l.decode(val, v.Field(i), fp.on(val))
		flawed = flawed || len(l.problems) > before
	}
	if f, ok := v.Addr().Interface().(interface{ flaw() }); ok && flawed {
		f.flaw()
	}
	return true
}

// text is a string. Numbers are taken as written, so that `id: 42` works;
// null is the same as leaving it out.
type text struct {
	pos
	s   string
	set bool // a value other than null was written
	bad bool // the value was not a string, and is reported
}

func (t *text) decode(l *loader, n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind == yaml.ScalarNode {
		switch n.ShortTag() {
		case "!!str", "!!int", "!!float":
			t.s, t.set = n.Value, true
			return
		}
	}
	t.bad = true
	l.wrong(t.pos, n, "a string")
}

// whole is a whole number; null is not one.
type whole struct {
	pos
	n int
}

func (w *whole) decode(l *loader, n *yaml.Node) {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&w.n) != nil {
		l.wrong(w.pos, n, "a whole number")
	}
}

// count is a limit: 0 means the default.
type count struct{ whole }

func (c *count) decode(l *loader, n *yaml.Node) {
	if c.whole.decode(l, n); c.n < 0 {
		l.addf(c.pos, "%d is negative: want 0 (the default) or more", c.n)
	}
}

// temperature is a number from 0 to 2; null is the same as leaving it out.
type temperature struct {
	pos
	v *float64
}

func (t *temperature) decode(l *loader, n *yaml.Node) {
	if isNull(n) {
		return
	}
	var v float64
	switch {
	case n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") || n.Decode(&v) != nil:
		l.addf(t.on(n), "want a number from 0 to 2")
	case !(v >= 0 && v <= 2): // NaN too
		l.addf(t.on(n), "%s is out of range: want a number from 0 to 2", n.Value)
	default:
		t.v = &v
	}
}

// approval is a tool's approval policy: never, always or a CEL
// expression. A YAML boolean is refused rather than read as a word.
type approval struct{ text }

func (p *approval) decode(l *loader, n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		l.addf(p.on(n), "%s is not a policy: want never, always or a CEL expression", n.Value)
		return
	}
	if p.text.decode(l, n); p.bad {
		return
	}
	switch strings.TrimSpace(p.s) {
	case "":
		l.addf(p.on(n), "is empty: want never, always or a CEL expression")
	case agent.ApprovalNever, agent.ApprovalAlways:
	default:
		if err := l.compilePolicy(p.s); err != nil {
			l.addf(p.on(n), "%s", err)
		}
	}
}

// schema is a tool's parameters: a JSON Schema of an object, as model
// providers require, kept as JSON.
type schema struct {
	pos
	raw json.RawMessage
}

func (s *schema) decode(l *loader, n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		l.wrong(s.pos, n, "a JSON Schema object (type: object)")
		return
	}
	var typ, props *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch n.Content[i].Value {
		case "type":
			typ = resolve(n.Content[i+1])
		case "properties":
			props = resolve(n.Content[i+1])
		}
	}
	ok := true
	if typ == nil || typ.Kind != yaml.ScalarNode || typ.Value != "object" {
		at, what := s.on(n), "missing"
		if typ != nil {
			at, what = s.on(typ), describe(typ)
		}
		at.field += ".type"
		l.addf(at, `want "object" (tool parameters are a JSON object), not %s`, what)
		ok = false
	}
	if props != nil && props.Kind != yaml.MappingNode {
		at := s.pos
		at.field += ".properties"
		l.wrong(at, props, "a mapping of argument names to schemas")
		ok = false
	}
	if ok {
		s.raw = l.json(s.pos, n)
	}
}

// object is any value, kept as JSON; null is the same as leaving it out.
type object struct {
	pos
	raw json.RawMessage
}

func (o *object) decode(l *loader, n *yaml.Node) {
	if !isNull(n) {
		o.raw = l.json(o.pos, n)
	}
}

// jsonDoc is a value kept as JSON with its YAML node, so that a problem
// found in the JSON is reported at the line it is on; null is the same as
// leaving it out.
type jsonDoc struct {
	pos
	raw  json.RawMessage
	node *yaml.Node
	bad  bool // the value has no JSON form, and is reported
}

func (d *jsonDoc) decode(l *loader, n *yaml.Node) {
	if isNull(n) {
		return
	}
	d.node = n
	before := len(l.problems)
	d.raw = l.json(d.pos, n)
	d.bad = len(l.problems) > before
}

// at is where the value at a JSON Pointer inside d is written: the
// deepest node the pointer can be followed to, with the field path of the
// pointer ("definition.nodes[1].id").
func (d *jsonDoc) at(pointer string) pos {
	at := d.pos
	n := d.node
	if n == nil {
		return at
	}
	at = at.on(resolve(n))
	toks, _ := process.Tokens(pointer)
	for _, tok := range toks {
		n = resolve(n)
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == tok {
					next = n.Content[i+1]
					at.field = join(at.field, tok)
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
				at.field = fmt.Sprintf("%s[%d]", at.field, i)
			}
		}
		if next == nil {
			return at
		}
		n = next
		at = at.on(resolve(n))
	}
	return at
}

// wrong reports a value of the wrong type, where it is defined.
func (l *loader) wrong(at pos, n *yaml.Node, want string) {
	l.addf(at.on(n), "want %s, not %s", want, describe(n))
}

// json converts a YAML value to compact JSON, keeping the key order.
func (l *loader) json(at pos, n *yaml.Node) json.RawMessage {
	var b bytes.Buffer
	if bad, err := writeJSON(&b, n, 0); err != nil {
		l.addf(at.on(bad), "%s", err)
		return nil
	}
	return b.Bytes()
}

// maxJSONBytes bounds the JSON made from one value, so that nested YAML
// aliases cannot expand into gigabytes.
const maxJSONBytes = 1 << 20

func writeJSON(b *bytes.Buffer, n *yaml.Node, depth int) (*yaml.Node, error) {
	if b.Len() > maxJSONBytes {
		return n, fmt.Errorf("is larger than %d bytes as JSON", maxJSONBytes)
	}
	if depth > 100 {
		return n, errors.New("nests deeper than 100 levels")
	}
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() == "!!merge" {
				return k, errors.New("keys must be plain strings (no merge keys or complex keys)")
			}
			if i > 0 {
				b.WriteByte(',')
			}
			writeString(b, k.Value)
			b.WriteByte(':')
			if bad, err := writeJSON(b, n.Content[i+1], depth+1); err != nil {
				return bad, err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if bad, err := writeJSON(b, v, depth+1); err != nil {
				return bad, err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return n, err
			}
			if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				return n, fmt.Errorf("%s has no JSON equivalent", n.Value)
			}
			fmt.Fprint(b, v)
		default: // strings, timestamps, binary: as written
			writeString(b, n.Value)
		}
	default:
		return n, fmt.Errorf("unsupported YAML node %s", describe(n))
	}
	return nil, nil
}

func writeString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always marshals
	b.Write(q)
}

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = resolve(n)
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's type for messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(clip(n.Value))
		}
		return clip(n.Value)
	}
	return "an unsupported YAML value"
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	if r := []rune(s); len(r) > 60 {
		return string(r[:60]) + "…"
	}
	return s
}

// boolean is true or false; null is false.
type boolean struct {
	pos
	v bool
}

func (b *boolean) decode(l *loader, n *yaml.Node) {
	if isNull(n) {
		return
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b.v) != nil {
		l.wrong(b.pos, n, "true or false")
	}
}
