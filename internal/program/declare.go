package program

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Declarations describes the tools as TypeScript declarations of the
// program's tools global, for the model's description of run_program:
//
//	declare const tools: {
//	  /** Look up an order. */
//	  get_order(args: { id: string; expand?: boolean }): Promise<any>;
//	};
//
// Each tool's parameters are typed from its JSON Schema (objects,
// required properties, arrays, enums, unions and the scalar types); what
// a schema does not say, or says in ways a type cannot, is any.
func Declarations(tools []Tool) string {
	var b strings.Builder
	b.WriteString("declare const tools: {\n")
	for _, t := range tools {
		if d := oneLine(t.Description); d != "" {
			b.WriteString("  /** " + d + " */\n")
		}
		var schema any
		if len(t.Parameters) > 0 {
			_ = json.Unmarshal(t.Parameters, &schema) // a schema that does not decode types as any
		}
		b.WriteString("  " + t.Name + "(args: " + tsType(schema, 0) + "): Promise<any>;\n")
	}
	b.WriteString("};\n")
	return b.String()
}

// DataDeclarations declares, as TypeScript, what a tool's call returns
// for data the tool keeps by reference, and the data global that reads
// it: a description of run_program shows it after Declarations.
const DataDeclarations = `/** What a tool's call returns for data kept by reference (large data, and every table) in place of the data: a preview. */
interface DataRef {
  ref: string;
  type: "dataset" | "document" | "text";
  bytes: number;
  row_count?: number;
  fields?: { name: string; type: string }[];
  sample?: any[];
  /** What the tool said beside its data. */
  text?: string;
}
declare const data: {
  /** The data behind a ref (a DataRef, or its ref: "cas://sha256:…"): its JSON value, or its text. Data read is counted against a limit: read what you need. */
  read(ref: DataRef | string): Promise<any>;
};
`

// maxTypeDepth bounds how deeply a schema is typed; deeper is any.
const maxTypeDepth = 6

// tsType is the TypeScript type of a JSON Schema.
func tsType(schema any, depth int) string {
	s, ok := schema.(map[string]any)
	if !ok || depth > maxTypeDepth {
		return "any"
	}
	if c, ok := s["const"]; ok {
		return literal(c)
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		parts := make([]string, len(e))
		for i, v := range e {
			parts[i] = literal(v)
		}
		return strings.Join(parts, " | ")
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			parts := make([]string, len(alts))
			for i, a := range alts {
				parts[i] = tsType(a, depth+1)
			}
			return strings.Join(parts, " | ")
		}
	}
	switch ty := s["type"].(type) {
	case string:
		return typeOf(ty, s, depth)
	case []any:
		var parts []string
		for _, v := range ty {
			if name, ok := v.(string); ok {
				parts = append(parts, typeOf(name, s, depth))
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, " | ")
		}
	}
	if _, ok := s["properties"]; ok {
		return typeOf("object", s, depth)
	}
	return "any"
}

func typeOf(name string, s map[string]any, depth int) string {
	switch name {
	case "string":
		return "string"
	case "number", "integer":
		return "number"
	case "boolean":
		return "boolean"
	case "null":
		return "null"
	case "array":
		item := tsType(s["items"], depth+1)
		if strings.Contains(item, " ") && !strings.HasPrefix(item, "{") {
			item = "(" + item + ")"
		}
		return item + "[]"
	case "object":
		props, _ := s["properties"].(map[string]any)
		if len(props) == 0 {
			return "Record<string, any>"
		}
		required := map[string]bool{}
		if req, ok := s["required"].([]any); ok {
			for _, r := range req {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		names := slices.Sorted(maps.Keys(props))
		parts := make([]string, len(names))
		for i, k := range names {
			opt := "?"
			if required[k] {
				opt = ""
			}
			key := k
			if !identifier(k) {
				key = strconv.Quote(k)
			}
			doc := ""
			if p, ok := props[k].(map[string]any); ok {
				if d, ok := p["description"].(string); ok && oneLine(d) != "" {
					doc = "/** " + oneLine(d) + " */ "
				}
			}
			parts[i] = doc + key + opt + ": " + tsType(props[k], depth+1)
		}
		return "{ " + strings.Join(parts, "; ") + " }"
	}
	return "any"
}

// literal is a JSON value as a TypeScript literal type.
func literal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "any"
	}
	return string(b)
}

// oneLine keeps a description to one line of at most 200 bytes, with
// nothing that would end the comment it goes in.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "*/", "* /")
	if len(s) > 200 {
		n := 200
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// identifier reports whether s is a JavaScript identifier (ASCII only:
// tool and property names that are not are quoted or refused).
func identifier(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
