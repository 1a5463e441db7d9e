package openapi

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Narrowing. kin-openapi loads a document whole (its tree of a 13 MB
// description takes hundreds of megabytes) and has no way to drop what a
// caller does not need, so the narrowing is done here, before it loads
// anything: two passes over the JSON with a streaming decoder, neither of
// which holds more than one path item or component at a time. The first
// finds the operations and, for every component, the components it
// refers to; the second copies the components the kept operations need,
// transitively. The result is a document of its own that kin-openapi then
// loads and validates.

// The index of the first pass is what narrowing holds besides what it
// keeps: about a hundred bytes per component (its name, and the ids of
// those it refers to), whatever the components' size.

// OperationInfo names an operation of a document read by Outline.
type OperationInfo struct {
	ID     string // the operationId, or "METHOD /path"
	Method string // upper case
	Path   string
}

// Safe reports whether the operation only reads: GET or HEAD.
func (op OperationInfo) Safe() bool { return safeMethod(op.Method) }

func safeMethod(m string) bool { return m == "GET" || m == "HEAD" }

// Outline lists the document's operations, by path and method, without
// loading it. A document that is not a JSON object, or not JSON, is an
// agent.CodeInvalid error.
func (s *Source) Outline() ([]OperationInfo, error) {
	n := newNarrowing(map[string]bool{})
	n.listOps = true
	if err := n.firstPass(s.open()); err != nil {
		return nil, err
	}
	return n.outline(), nil
}

// Narrow returns the document as JSON with only the operations ids name
// (none: every operation) and what they use: the components they refer to,
// transitively (schemas, parameters, responses, request bodies, headers,
// examples, links, callbacks; a Swagger 2.0 document's definitions,
// parameters and responses), the security schemes their security
// requirements name, and the document's openapi (or swagger), info,
// servers and security. Tags, webhooks and extensions at the top are left
// out. An id the document does not have is an agent.CodeInvalid error that
// lists those it has, as is a reference into the document outside its
// components, which narrowing cannot follow. References to other files
// are kept as they are (Load refuses them).
func (s *Source) Narrow(ids []string) ([]byte, error) {
	var want map[string]bool
	if len(ids) > 0 {
		want = map[string]bool{}
		for _, id := range ids {
			want[id] = true
		}
	}
	n := newNarrowing(want)
	if err := n.firstPass(s.open()); err != nil {
		return nil, err
	}
	if want != nil {
		var unknown []string
		for _, id := range ids {
			if !n.seen[id] {
				unknown = append(unknown, fmt.Sprintf("%q", id))
			}
		}
		if len(unknown) > 0 {
			// Rare, and worth a pass more: the first kept no list.
			ops, err := s.Outline()
			if err != nil {
				return nil, err
			}
			return nil, agent.Errorf(agent.CodeInvalid, "operations %s: the document has no such operation; it has %s",
				strings.Join(unknown, ", "), ListIDs(outlineIDs(ops), 50))
		}
	}
	if err := n.closure(); err != nil {
		return nil, err
	}
	if err := n.secondPass(s.open()); err != nil {
		return nil, err
	}
	n.slimComponents()
	return n.write()
}

func outlineIDs(ops []OperationInfo) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.ID
	}
	return out
}

// compKey names a component: group "components" with its section
// ("schemas") in OpenAPI 3, or group "" with a top-level section
// ("definitions") in Swagger 2.0.
type compKey struct{ group, section, name string }

// String is the key as the index holds it.
func (k compKey) String() string { return k.group + "\x00" + k.section + "\x00" + k.name }

// swagger2Sections are Swagger 2.0's top-level component sections.
var swagger2Sections = map[string]bool{"definitions": true, "parameters": true, "responses": true, "securityDefinitions": true}

// keptTop are the top-level members a narrowed document keeps as they are.
var keptTop = map[string]bool{"openapi": true, "swagger": true, "info": true, "servers": true, "security": true,
	"jsonSchemaDialect": true, "host": true, "basePath": true, "schemes": true, "consumes": true, "produces": true}

type narrowing struct {
	want    map[string]bool // operation ids to keep; nil: all
	listOps bool            // keep ops, every operation's id, method and path
	swagger bool            // the document is Swagger 2.0

	ops   []OperationInfo
	seen  map[string]bool // the operation ids kept
	top   []member        // keptTop members
	paths []member        // path items, narrowed to the kept operations
	// Components are numbered as they are first named, by a reference or
	// a definition; refs holds what each defined one refers to. need,
	// after closure, says which to keep; got, after the second pass,
	// holds them.
	ids     map[string]int32 // by compKey.String
	defined []bool
	refs    [][]int32
	roots   []int32  // what the kept operations and top members use
	schemes []string // security schemes they name
	bad     string   // a reference narrowing cannot follow
	need    []bool
	got     map[string][]component // by group + "/" + section
	order   []string               // groups/sections in document order
}

// component is a component the second pass copied.
type component struct {
	name string
	id   int32
	raw  json.RawMessage
	kept bool // still needed once slimmed
}

func newNarrowing(want map[string]bool) *narrowing {
	return &narrowing{want: want, seen: map[string]bool{}, ids: map[string]int32{}}
}

// id numbers a component.
func (n *narrowing) id(k compKey) int32 {
	key := k.String()
	if id, ok := n.ids[key]; ok {
		return id
	}
	id := int32(len(n.defined))
	n.ids[key] = id
	n.defined = append(n.defined, false)
	n.refs = append(n.refs, nil)
	return id
}

func (n *narrowing) outline() []OperationInfo {
	out := slices.Clone(n.ops)
	slices.SortStableFunc(out, func(a, b OperationInfo) int {
		if c := strings.Compare(a.Path, b.Path); c != 0 {
			return c
		}
		return methodRank(a.Method) - methodRank(b.Method)
	})
	return out
}

func methodRank(m string) int {
	if i := slices.Index(methods, m); i >= 0 {
		return i
	}
	return len(methods)
}

func (n *narrowing) firstPass(r io.Reader) error {
	dec := json.NewDecoder(r)
	err := objectMembers(dec, func(key string) error {
		switch {
		case key == "paths":
			return n.readPaths(dec)
		case key == "components":
			return lenient(objectMembers(dec, func(section string) error {
				return n.indexSection(dec, "components", section)
			}))
		case swagger2Sections[key]:
			return n.indexSection(dec, "", key)
		case keptTop[key]:
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			var b bytes.Buffer
			if json.Compact(&b, v) == nil {
				v = b.Bytes()
			}
			n.top = append(n.top, member{key, v})
			n.swagger = n.swagger || key == "swagger"
			n.use(v)
			if key == "security" {
				n.security(v)
			}
			return nil
		}
		return skip(dec, 0)
	})
	if errors.Is(err, errNotObject) {
		return err
	}
	if err != nil {
		return docError(err)
	}
	return nil
}

// indexSection records the references of each component of a section;
// a section that is not an object is left out.
func (n *narrowing) indexSection(dec *json.Decoder, group, section string) error {
	var raw json.RawMessage
	return lenient(objectMembers(dec, func(name string) error {
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		var refs []int32
		scanRefs(raw, func(ref string) {
			if k, ok := n.refKey(ref); ok {
				refs = append(refs, n.id(k))
			}
		})
		id := n.id(compKey{group, section, name})
		n.defined[id], n.refs[id] = true, slices.Clip(refs)
		return nil
	}))
}

// lenient passes over a value that is not an object where one should be:
// what is wrong with it is the validator's to say.
func lenient(err error) error {
	if errors.Is(err, errNotObject) {
		return nil
	}
	return err
}

// readPaths reads the path items, keeping the operations wanted.
func (n *narrowing) readPaths(dec *json.Decoder) error {
	err := objectMembers(dec, func(path string) error {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		if !isObject(raw) {
			return nil
		}
		members, err := rawMembers(raw)
		if err != nil {
			return err
		}
		var kept []member
		keptOps := 0
		for _, m := range members {
			method := strings.ToUpper(m.key)
			if !slices.Contains(methods, method) {
				kept = append(kept, m) // parameters, servers, summary…
				continue
			}
			var head struct {
				OperationID string          `json:"operationId"`
				Security    json.RawMessage `json:"security"`
			}
			_ = json.Unmarshal(m.raw, &head) // an operation that is not an object is the validator's to name
			id := cmp.Or(head.OperationID, method+" "+path)
			if n.listOps {
				n.ops = append(n.ops, OperationInfo{ID: id, Method: method, Path: path})
			}
			if n.want != nil {
				if !n.want[id] {
					continue
				}
				// Two operations of one name are Load's to find among
				// those it keeps all of; among those narrowed to, here.
				if n.seen[id] {
					return agent.Errorf(agent.CodeInvalid, "two operations are named %q", id)
				}
				n.seen[id] = true
			}
			kept = append(kept, m)
			keptOps++
			if len(head.Security) > 0 {
				n.security(head.Security)
			}
		}
		if keptOps == 0 {
			return nil
		}
		var b bytes.Buffer
		writeObject(&b, kept)
		item := slimmer{}.slim(b.Bytes(), slimObject) // the document's version may be still to come
		n.paths = append(n.paths, member{path, item})
		n.use(item)
		return nil
	})
	return lenient(err)
}

// use notes the components a kept value refers to.
func (n *narrowing) use(raw json.RawMessage) {
	scanRefs(raw, func(ref string) {
		if k, ok := n.refKey(ref); ok {
			n.roots = append(n.roots, n.id(k))
		}
	})
}

// security notes the schemes a list of security requirements names.
func (n *narrowing) security(raw json.RawMessage) {
	var reqs []map[string]json.RawMessage
	if json.Unmarshal(raw, &reqs) != nil {
		return
	}
	for _, r := range reqs {
		n.schemes = slices.AppendSeq(n.schemes, maps.Keys(r))
	}
}

// refKey reads a reference into the document: the component it names, or
// false for one to another file. A reference elsewhere in the document
// is noted as one narrowing cannot follow.
func (n *narrowing) refKey(ref string) (compKey, bool) {
	frag, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return compKey{}, false
	}
	parts := strings.SplitN(frag, "/", 4)
	for i, p := range parts {
		if u, err := url.PathUnescape(p); err == nil {
			p = u
		}
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(p)
	}
	switch {
	case parts[0] == "components" && len(parts) >= 3:
		return compKey{"components", parts[1], parts[2]}, true
	case swagger2Sections[parts[0]] && len(parts) >= 2:
		return compKey{"", parts[0], parts[1]}, true
	}
	n.bad = cmp.Or(n.bad, ref)
	return compKey{}, false
}

// closure finds every component the kept operations need.
func (n *narrowing) closure() error {
	if n.bad != "" && n.want != nil {
		return agent.Errorf(agent.CodeInvalid, "$ref %q points into the document outside its components, which narrowing to operations cannot follow: move what it names into components", words.Clip(n.bad, 120))
	}
	n.need = make([]bool, len(n.defined))
	todo := slices.Clone(n.roots)
	if n.want == nil {
		for id := range n.defined {
			todo = append(todo, int32(id)) // every operation: every component, as the document has them
		}
	}
	for _, name := range n.schemes {
		todo = append(todo, n.id(compKey{"components", "securitySchemes", name}), n.id(compKey{"", "securityDefinitions", name}))
	}
	n.need = append(n.need, make([]bool, len(n.defined)-len(n.need))...)
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if n.need[id] || !n.defined[id] {
			continue // kept already, or not in the document: the validator names it
		}
		n.need[id] = true
		todo = append(todo, n.refs[id]...)
	}
	n.refs = nil
	return nil
}

// secondPass copies the components needed.
func (n *narrowing) secondPass(r io.Reader) error {
	n.got = map[string][]component{}
	sl := slimmer{schemaExtensions: !n.swagger}
	dec := json.NewDecoder(r)
	copySection := func(group, section string) error {
		var raw json.RawMessage
		return lenient(objectMembers(dec, func(name string) error {
			// A component is small: read whole, into the same buffer,
			// and dropped unless needed.
			if err := dec.Decode(&raw); err != nil {
				return err
			}
			id, ok := n.ids[compKey{group, section, name}.String()]
			if !ok || !n.need[id] {
				return nil
			}
			at := group + "/" + section
			if _, ok := n.got[at]; !ok {
				n.order = append(n.order, at)
			}
			n.got[at] = append(n.got[at], component{name: name, id: id, raw: sl.slim(raw, sectionContext(group, section))})
			return nil
		}))
	}
	err := objectMembers(dec, func(key string) error {
		switch {
		case key == "components":
			return lenient(objectMembers(dec, func(section string) error { return copySection("components", section) }))
		case swagger2Sections[key]:
			return copySection("", key)
		}
		return skip(dec, 0)
	})
	if err != nil {
		return docError(err)
	}
	return nil
}

// slimComponents keeps, of the components copied, those the operations
// still need once slimmed: an example the first pass followed a
// reference to is gone, and with it what only it referred to.
func (n *narrowing) slimComponents() {
	refs := map[int32][]int32{}
	for _, list := range n.got {
		for _, c := range list {
			scanRefs(c.raw, func(ref string) {
				if k, ok := n.refKey(ref); ok {
					if id, ok := n.ids[k.String()]; ok {
						refs[c.id] = append(refs[c.id], id)
					}
				}
			})
		}
	}
	keep := map[int32]bool{}
	todo := slices.Clone(n.roots)
	for _, name := range n.schemes {
		for _, k := range []compKey{{"components", "securitySchemes", name}, {"", "securityDefinitions", name}} {
			if id, ok := n.ids[k.String()]; ok {
				todo = append(todo, id)
			}
		}
	}
	for _, list := range n.got {
		for _, c := range list {
			if n.want == nil {
				todo = append(todo, c.id) // every operation: every component
			}
		}
	}
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if !keep[id] {
			keep[id] = true
			todo = append(todo, refs[id]...)
		}
	}
	for at, list := range n.got {
		for i := range list {
			list[i].kept = keep[list[i].id]
		}
		n.got[at] = list
	}
}

// write writes the narrowed document.
func (n *narrowing) write() ([]byte, error) {
	var top []member
	top = append(top, n.top...)
	var paths bytes.Buffer
	writeObject(&paths, n.paths)
	top = append(top, member{"paths", paths.Bytes()})
	var components []member
	for _, id := range n.order {
		group, section, _ := strings.Cut(id, "/")
		var kept []member
		for _, c := range n.got[id] {
			if c.kept {
				kept = append(kept, member{c.name, c.raw})
			}
		}
		if len(kept) == 0 {
			continue
		}
		var b bytes.Buffer
		writeObject(&b, kept)
		if group == "" {
			top = append(top, member{section, b.Bytes()})
		} else {
			components = append(components, member{section, b.Bytes()})
		}
	}
	if len(components) > 0 {
		var b bytes.Buffer
		writeObject(&b, components)
		top = append(top, member{"components", b.Bytes()})
	}
	var out bytes.Buffer
	writeObject(&out, top)
	return out.Bytes(), nil
}
