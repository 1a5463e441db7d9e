package openapi

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/agentflow/agentflow/internal/words"
)

// MaxDescription bounds Description: past it, operations are only named.
const MaxDescription = 16 << 10

// Description tells a model, after intro, how to call the document's
// operations and what each takes: its method and path, summary,
// parameters (location, type, required) and body. marked, when set, says
// which operations to mark with note (such as "needs approval").
func (d *Document) Description(intro string, marked func(*Operation) bool, note string) string {
	var b strings.Builder
	if intro = strings.TrimSpace(intro); intro != "" {
		b.WriteString(intro)
		if !strings.HasSuffix(intro, ".") {
			b.WriteString(".")
		}
		b.WriteString(" ")
	}
	b.WriteString(`Call one operation per call: {"operation_id": "...", "params": {"name": value}, "body": ...}. ` +
		"params holds path, query, header and cookie parameters by name; body is the request body, for operations that take one.\nOperations:")
	for i, op := range d.ops {
		line := "\n- " + op.ID + ": " + op.Method + " " + op.Path + "."
		if s := oneLine(op.Summary, 200); s != "" {
			line += " " + s
			if !strings.HasSuffix(s, ".") {
				line += "."
			}
		}
		if len(op.Params) > 0 {
			var ps []string
			for j, p := range op.Params {
				ps = append(ps, paramText(op.Keys[j], p))
			}
			line += " Params: " + strings.Join(ps, "; ") + "."
		}
		if op.Body != nil {
			line += " " + bodyText(op.Body)
		}
		if marked != nil && marked(op) {
			line += " " + note
		}
		if b.Len()+len(line) > MaxDescription {
			rest := d.IDs()[i:]
			fmt.Fprintf(&b, "\n- and %d more, called the same way: %s", len(rest), strings.Join(rest, ", "))
			break
		}
		b.WriteString(line)
	}
	return b.String()
}

// paramText is `customerId (path, integer, required)`.
func paramText(key string, p *openapi3.Parameter) string {
	parts := []string{p.In}
	var s *openapi3.SchemaRef
	if p.Schema != nil {
		s = p.Schema
	} else {
		for mt, c := range p.Content {
			parts = append(parts, "JSON-encoded "+mediaType(mt))
			s = c.Schema
		}
	}
	if t := schemaText(s, 1); t != "" {
		parts = append(parts, t)
	}
	if p.Required {
		parts = append(parts, "required")
	}
	text := key + " (" + strings.Join(parts, ", ") + ")"
	if desc := oneLine(p.Description, 100); desc != "" {
		text += ": " + desc
	}
	return text
}

// bodyText is `Body (application/json, required): object {…}.`
func bodyText(rb *openapi3.RequestBody) string {
	mt := bodyType(rb.Content)
	parts := []string{cmp.Or(mt, strings.Join(slices.Sorted(maps.Keys(rb.Content)), ", "))}
	if rb.Required {
		parts = append(parts, "required")
	}
	text := "Body (" + strings.Join(parts, ", ") + ")"
	if c := rb.Content.Get(mt); c != nil && c.Schema != nil {
		text += ": " + schemaText(c.Schema, 3)
	}
	return text + "."
}

// schemaText describes a schema briefly: its type, an array's items, an
// object's properties down to depth levels, enums and formats.
func schemaText(ref *openapi3.SchemaRef, depth int) string {
	if ref == nil || ref.Value == nil {
		return ""
	}
	s := ref.Value
	for _, group := range []openapi3.SchemaRefs{s.OneOf, s.AnyOf} {
		if len(group) > 0 {
			var alts []string
			for _, g := range group[:min(len(group), 4)] {
				alts = append(alts, cmp.Or(schemaText(g, depth-1), "any"))
			}
			return "one of " + strings.Join(alts, " | ")
		}
	}
	if len(s.AllOf) == 1 && s.Type == nil {
		return schemaText(s.AllOf[0], depth)
	}
	var t string
	if s.Type != nil {
		t = strings.Join(s.Type.Slice(), "|")
	}
	switch {
	case s.Type.Is("array") && s.Items != nil:
		if it := schemaText(s.Items, depth-1); it != "" {
			t += " of " + it
		}
	case (s.Type.Is("object") || s.Type == nil) && len(s.Properties) > 0 && depth > 0:
		var props []string
		names := slices.Sorted(maps.Keys(s.Properties))
		for _, name := range names[:min(len(names), 12)] {
			p := name + " " + cmp.Or(schemaText(s.Properties[name], depth-1), "any")
			if slices.Contains(s.Required, name) {
				p += " (required)"
			}
			props = append(props, p)
		}
		if len(names) > 12 {
			props = append(props, fmt.Sprintf("and %d more", len(names)-12))
		}
		t = "object {" + strings.Join(props, ", ") + "}"
	}
	if s.Format != "" {
		t += " (" + s.Format + ")"
	}
	if s.Default != nil && depth > 0 {
		t += fmt.Sprintf(", default %v", s.Default)
	}
	if len(s.Enum) > 0 && len(s.Enum) <= 12 {
		var vals []string
		for _, v := range s.Enum {
			vals = append(vals, fmt.Sprint(v))
		}
		t += ": " + strings.Join(vals, "|")
	}
	return t
}

// Parameters is the JSON Schema of a call's arguments, with the
// operations' ids as operation_id's enum.
func (d *Document) Parameters() json.RawMessage {
	schema := map[string]any{
		"type":                 "object",
		"additionalProperties": false,
		"required":             []string{"operation_id"},
		"properties": map[string]any{
			"operation_id": map[string]any{"type": "string", "enum": d.IDs(), "description": "the operation to call"},
			"params": map[string]any{"type": "object",
				"description": "the operation's parameters by name (path, query, header and cookie parameters)"},
			"body": map[string]any{"description": "the request body, for operations that take one"},
		},
	}
	data, err := json.Marshal(schema)
	if err != nil {
		panic(fmt.Sprintf("openapi: encode parameters: %v", err)) // maps of strings always encode
	}
	return data
}

// oneLine is s on one line, clipped to n bytes.
func oneLine(s string, n int) string {
	return words.Clip(strings.Join(strings.Fields(s), " "), n)
}
