package strictschema

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
)

// Restore returns a call's arguments as the tool's own schema says them:
// a null the model wrote for a property schema leaves optional and does
// not let be null (a property Make made nullable) is the property left
// out, in objects at any depth — under properties, items, $ref, allOf,
// and the one branch of an anyOf or oneOf the object fits. Arguments with
// nothing to restore, or that are not JSON, are returned as they are.
func Restore(schema, args json.RawMessage) json.RawMessage {
	if len(schema) == 0 || !bytes.Contains(args, []byte("null")) {
		return args
	}
	s, err := decode(schema)
	if err != nil {
		return args
	}
	v, err := decode(args)
	if err != nil {
		return args
	}
	r := restorer{root: s}
	if !r.restore(s, v, 0) {
		return args
	}
	b, err := json.Marshal(v)
	if err != nil {
		return args
	}
	return b
}

// restorer walks a value along the schema it was written for.
type restorer struct{ root any }

// maxRestoreDepth bounds the walk, which a recursive schema and a deep
// value could otherwise make long.
const maxRestoreDepth = 64

func (r restorer) restore(s, v any, depth int) bool {
	if depth > maxRestoreDepth {
		return false
	}
	obj, ok := r.resolve(s).(map[string]any)
	if !ok {
		return false
	}
	changed := false
	switch val := v.(type) {
	case map[string]any:
		if props, ok := obj["properties"].(map[string]any); ok {
			required, _ := names(obj["required"])
			for name, x := range val {
				ps, declared := props[name]
				switch {
				case !declared:
				case x == nil && !slices.Contains(required, name) && !allowsNull(ps, r.resolve):
					delete(val, name)
					changed = true
				case r.restore(ps, x, depth+1):
					changed = true
				}
			}
		}
		for _, b := range r.branches(obj, val) {
			if r.restore(b, val, depth+1) {
				changed = true
			}
		}
	case []any:
		if items, ok := obj["items"]; ok {
			for _, x := range val {
				if r.restore(items, x, depth+1) {
					changed = true
				}
			}
		}
	}
	return changed
}

// branches are the subschemas an object value is also held to: every one
// of allOf, and of anyOf or oneOf the one it fits (fits).
func (r restorer) branches(obj map[string]any, val map[string]any) []any {
	out, _ := obj["allOf"].([]any)
	for _, k := range []string{"anyOf", "oneOf"} {
		list, _ := obj[k].([]any)
		var fit []any
		for _, b := range list {
			if r.fits(b, val) {
				fit = append(fit, b)
			}
		}
		if len(fit) == 1 {
			out = append(out, fit[0])
		}
	}
	return out
}

// fits reports whether an object value can be an instance of schema b:
// b declares every member the value has, and the value holds b's
// single-valued members (an enum of one value, a const) — the tag of a
// tagged union such as execute_pipeline's steps.
func (r restorer) fits(b any, val map[string]any) bool {
	obj, ok := r.resolve(b).(map[string]any)
	if !ok {
		return false
	}
	props, ok := obj["properties"].(map[string]any)
	if !ok {
		return false
	}
	for name := range val {
		if _, ok := props[name]; !ok {
			return false
		}
	}
	for name, ps := range props {
		p, _ := r.resolve(ps).(map[string]any)
		want, single := p["const"]
		if enum, ok := p["enum"].([]any); ok && len(enum) == 1 {
			want, single = enum[0], true
		}
		if single && !reflect.DeepEqual(val[name], want) {
			return false
		}
	}
	return true
}

// resolve follows local $refs ("#", "#/$defs/x", "#/definitions/x").
func (r restorer) resolve(s any) any {
	for range 8 {
		obj, ok := s.(map[string]any)
		if !ok {
			return s
		}
		ref, ok := obj["$ref"].(string)
		if !ok {
			return s
		}
		s = lookup(r.root, ref)
	}
	return s
}

// lookup is the schema a local $ref names in root; nil when none.
func lookup(root any, ref string) any {
	if ref == "#" {
		return root
	}
	obj, _ := root.(map[string]any)
	for _, k := range []string{"$defs", "definitions"} {
		if name, ok := strings.CutPrefix(ref, "#/"+k+"/"); ok {
			defs, _ := obj[k].(map[string]any)
			return defs[strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")]
		}
	}
	return nil
}

// noRecursion refuses a schema whose $refs make a cycle, which
// Anthropic's strict mode does not take.
func noRecursion(root map[string]any) error {
	edges := map[string][]string{}
	var walk func(from string, s any)
	walk = func(from string, s any) {
		switch v := s.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				edges[from] = append(edges[from], ref)
			}
			for k, sub := range v {
				if (k == "$defs" || k == "definitions") && from == "#" {
					continue
				}
				walk(from, sub)
			}
		case []any:
			for _, sub := range v {
				walk(from, sub)
			}
		}
	}
	walk("#", root)
	for _, k := range []string{"$defs", "definitions"} {
		defs, _ := root[k].(map[string]any)
		for name, d := range defs {
			walk("#/"+k+"/"+pointerEscape(name), d)
		}
	}
	state := map[string]int{} // 1: on the path, 2: done
	var visit func(n string) bool
	visit = func(n string) bool {
		switch state[n] {
		case 1:
			return true
		case 2:
			return false
		}
		state[n] = 1
		for _, next := range edges[n] {
			if visit(next) {
				return true
			}
		}
		state[n] = 2
		return false
	}
	if visit("#") {
		return refuse("", "a recursive schema, which Anthropic's strict mode does not take")
	}
	return nil
}
