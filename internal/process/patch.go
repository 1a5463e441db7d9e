package process

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Bounds of a patch.
const (
	MaxOperations     = 100
	maxDescription    = 2000
	maxPointerBytes   = 1024
	maxCopyGrowth     = MaxDefinitionBytes // what copy operations may add in all
	maxShownValueSize = 200
)

// Parameters is the JSON Schema of a patch_workflow call's arguments, the
// one the tool shows the model (seed 004 §5.2, with every RFC 6902
// operation). DecodePatch checks what it says and more.
const Parameters = `{
  "type": "object",
  "description": "Change a process definition for good: apply JSON Patch (RFC 6902) operations to the latest version of the process named by workflow_tag. The result is checked and stored as a new version; a person may have to approve the call first. A definition is {\"nodes\": [{\"id\", \"type\", ...}], \"edges\": [{\"from\", \"to\", \"condition\"?, ...}]}: node ids are unique and edges join existing nodes.",
  "required": ["workflow_tag", "patch_spec"],
  "additionalProperties": false,
  "properties": {
    "workflow_tag": {"type": "string", "minLength": 1, "description": "Tag of the process to patch, e.g. main."},
    "patch_spec": {
      "type": "object",
      "required": ["operations", "description"],
      "additionalProperties": false,
      "properties": {
        "operations": {
          "type": "array",
          "minItems": 1,
          "maxItems": 100,
          "description": "JSON Patch operations, applied in order; all or none take effect.",
          "items": {
            "type": "object",
            "required": ["op", "path"],
            "additionalProperties": false,
            "properties": {
              "op": {"type": "string", "enum": ["add", "remove", "replace", "move", "copy", "test"]},
              "path": {"type": "string", "description": "JSON Pointer into the definition, e.g. /nodes/- (append a node) or /edges/2/condition."},
              "from": {"type": "string", "description": "move and copy: JSON Pointer of the value to move or copy."},
              "value": {"description": "add, replace and test: the value."}
            }
          }
        },
        "description": {"type": "string", "minLength": 1, "description": "What the change does and why, for the audit log."}
      }
    }
  }
}`

// Operation kinds (RFC 6902).
const (
	OpAdd     = "add"
	OpRemove  = "remove"
	OpReplace = "replace"
	OpMove    = "move"
	OpCopy    = "copy"
	OpTest    = "test"
)

var opMembers = map[string][]string{
	OpAdd:     {"path", "value"},
	OpRemove:  {"path"},
	OpReplace: {"path", "value"},
	OpMove:    {"from", "path"},
	OpCopy:    {"from", "path"},
	OpTest:    {"path", "value"},
}

// Op is one JSON Patch operation.
type Op struct {
	Op    string          `json:"op"`
	Path  string          `json:"path"`
	From  string          `json:"from,omitempty"`
	Value json.RawMessage `json:"value,omitempty"` // absent for remove, move and copy
}

// String names the operation in messages: "add /nodes/-".
func (o Op) String() string {
	if o.From != "" {
		return fmt.Sprintf("%s %s → %s", o.Op, o.From, o.Path)
	}
	return o.Op + " " + o.Path
}

// Patch is a checked patch_workflow call.
type Patch struct {
	Tag         string
	Description string
	Operations  []Op
}

// OperationsJSON is the operations as JSON, as they are applied and
// recorded.
func (p Patch) OperationsJSON() json.RawMessage {
	b, err := marshal(p.Operations)
	if err != nil {
		// Ops hold strings and valid raw JSON only.
		panic("process: encode operations: " + err.Error())
	}
	return b
}

// DecodePatch checks a patch_workflow call's arguments. Its errors are
// agent.CodeInvalid and say what to change.
func DecodePatch(args []byte) (Patch, error) {
	fields, err := object(args, "the arguments")
	if err != nil {
		return Patch{}, err
	}
	if err := known(fields, "", "workflow_tag", "patch_spec"); err != nil {
		return Patch{}, err
	}
	var p Patch
	if p.Tag, err = str(fields, "workflow_tag", "workflow_tag"); err != nil {
		return Patch{}, err
	}
	if p.Tag == "" {
		return Patch{}, invalid("workflow_tag is required: the tag of the process to patch, e.g. main")
	}
	if err := agent.ValidateID("workflow_tag", p.Tag); err != nil {
		return Patch{}, err
	}
	rawSpec, ok := fields["patch_spec"]
	if !ok {
		return Patch{}, invalid(`patch_spec is required: {"operations": [...], "description": "..."}`)
	}
	spec, err := object(rawSpec, "patch_spec")
	if err != nil {
		return Patch{}, err
	}
	if err := known(spec, "patch_spec.", "operations", "description"); err != nil {
		return Patch{}, err
	}
	if p.Description, err = str(spec, "description", "patch_spec.description"); err != nil {
		return Patch{}, err
	}
	p.Description = strings.TrimSpace(p.Description)
	switch {
	case p.Description == "":
		return Patch{}, invalid("patch_spec.description is required: say what the change does, for the audit log")
	case len(p.Description) > maxDescription:
		return Patch{}, invalid("patch_spec.description is %d bytes; the limit is %d", len(p.Description), maxDescription)
	}
	rawOps, ok := spec["operations"]
	if !ok {
		return Patch{}, invalid(`patch_spec.operations is required: a list of JSON Patch operations such as {"op": "add", "path": "/nodes/-", "value": {...}}`)
	}
	if p.Operations, err = DecodeOperations(rawOps); err != nil {
		return Patch{}, err
	}
	return p, nil
}

// DecodeOperations checks a JSON array of RFC 6902 operations.
func DecodeOperations(raw []byte) ([]Op, error) {
	var items []json.RawMessage
	if err := strictUnmarshal(raw, &items); err != nil {
		return nil, invalid("patch_spec.operations must be an array of operations, not %s", kindOf(raw))
	}
	switch {
	case len(items) == 0:
		return nil, invalid("patch_spec.operations is empty: give at least one operation")
	case len(items) > MaxOperations:
		return nil, invalid("patch_spec.operations has %d operations; the limit is %d", len(items), MaxOperations)
	}
	ops := make([]Op, len(items))
	for i, item := range items {
		op, err := decodeOp(item, fmt.Sprintf("operations[%d]", i))
		if err != nil {
			return nil, err
		}
		ops[i] = op
	}
	return ops, nil
}

func decodeOp(raw []byte, at string) (Op, error) {
	fields, err := object(raw, at)
	if err != nil {
		return Op{}, err
	}
	var op Op
	if op.Op, err = str(fields, "op", at+".op"); err != nil {
		return Op{}, err
	}
	members, ok := opMembers[op.Op]
	if !ok {
		return Op{}, invalid("%s.op %q: want one of add, remove, replace, move, copy, test", at, op.Op)
	}
	if err := known(fields, at+".", append([]string{"op"}, members...)...); err != nil {
		return Op{}, fmt.Errorf("%w (%s takes %s)", err, op.Op, strings.Join(members, ", "))
	}
	for _, m := range members {
		v, ok := fields[m]
		if !ok {
			return Op{}, invalid("%s: %s needs %s", at, op.Op, m)
		}
		switch m {
		case "path", "from":
			s, err := str(fields, m, at+"."+m)
			if err != nil {
				return Op{}, err
			}
			if err := checkPointer(s, at+"."+m); err != nil {
				return Op{}, err
			}
			if m == "path" {
				op.Path = s
			} else {
				op.From = s
			}
		case "value":
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err != nil {
				return Op{}, invalid("%s.value is not JSON: %v", at, err)
			}
			op.Value = buf.Bytes()
		}
	}
	if op.Op == OpMove && (op.Path == op.From || strings.HasPrefix(op.Path, op.From+"/")) {
		return Op{}, invalid("%s: cannot move %s into itself (%s)", at, op.From, op.Path)
	}
	return op, nil
}

// checkPointer refuses what is not a JSON Pointer into the definition.
func checkPointer(p, at string) error {
	switch {
	case p == "":
		return invalid("%s is empty, which means the whole definition: point into it instead, e.g. /nodes/- or /edges/0", at)
	case len(p) > maxPointerBytes:
		return invalid("%s is %d bytes; the limit is %d", at, len(p), maxPointerBytes)
	}
	if _, ok := Tokens(p); !ok {
		hint := ""
		if p[0] != '/' {
			hint = fmt.Sprintf(" (did you mean /%s?)", p)
		}
		return invalid("%s %q is not a JSON Pointer: it starts with / and writes ~ as ~0 and / as ~1%s", at, p, hint)
	}
	return nil
}

// Apply runs ops on def, in order, and returns the new definition. An
// operation that cannot be applied fails the whole patch, naming it by its
// index and saying what is at its path instead (agent.CodeInvalid).
func Apply(def json.RawMessage, ops []Op) (json.RawMessage, error) {
	if len(def) == 0 || !json.Valid(def) {
		return nil, errors.New("apply patch: the definition is not JSON")
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = false // RFC 6902: indices are ≥ 0 or "-"
	opts.AccumulatedCopySizeLimit = maxCopyGrowth
	opts.EscapeHTML = false
	doc := []byte(def)
	for i, op := range ops {
		next, err := applyOne(doc, op, opts)
		if err != nil {
			return nil, invalid("operations[%d] (%s): %s", i, op, explain(doc, op, err))
		}
		if len(next) > MaxDefinitionBytes {
			return nil, invalid("operations[%d] (%s): the definition would be %d bytes; the limit is %d", i, op, len(next), MaxDefinitionBytes)
		}
		doc = next
	}
	return doc, nil
}

// applyOne applies one operation. The library is not trusted to refuse
// every malformed input without panicking: a panic is an error here.
func applyOne(doc []byte, op Op, opts *jsonpatch.ApplyOptions) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("cannot be applied (%v)", r)
		}
	}()
	raw, err := marshal([]Op{op})
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, err
	}
	return p.ApplyWithOptions(doc, opts)
}

// explain says why op could not be applied to doc: what is at its paths
// instead, else the library's reason.
func explain(doc []byte, op Op, err error) string {
	v, derr := agent.UnmarshalNumbers(doc)
	if derr != nil {
		return err.Error()
	}
	if op.Op == OpTest && errors.Is(err, jsonpatch.ErrTestFailed) {
		if got, why := lookUp(v, op.Path, false); why == "" {
			return fmt.Sprintf("test failed: the value at %s is %s, not %s", op.Path, show(got), clip(string(op.Value)))
		}
	}
	if op.From != "" {
		if _, why := lookUp(v, op.From, false); why != "" {
			return "from: " + why
		}
	}
	adding := op.Op == OpAdd || op.Op == OpMove || op.Op == OpCopy
	if _, why := lookUp(v, op.Path, adding); why != "" {
		return why
	}
	return strings.TrimSpace(err.Error())
}

// lookUp finds the value at pointer p in doc. With forAdd, the last token
// may name a new object key, or an array index up to its length, or "-".
// why says what is missing, for a message; empty when the value is there.
func lookUp(doc any, p string, forAdd bool) (_ any, why string) {
	toks, ok := Tokens(p)
	if !ok {
		return nil, fmt.Sprintf("%q is not a JSON Pointer", p)
	}
	cur := doc
	for i, tok := range toks {
		at := Pointer(toks[:i]) // the container's pointer
		name := cmp.Or(at, "the definition")
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				if last && forAdd {
					return nil, ""
				}
				keys := slices.Sorted(maps.Keys(c))
				has := "has no keys"
				if len(keys) > 0 {
					has = "has " + clip(strings.Join(keys, ", "))
				}
				return nil, fmt.Sprintf("%s does not exist; %s %s", Pointer(toks[:i+1]), name, has)
			}
			cur = next
		case []any:
			if tok == "-" {
				if last && forAdd {
					return nil, ""
				}
				return nil, fmt.Sprintf("%s: \"-\" (after the last item) names no item; it is only for adding to the end of %s", Pointer(toks[:i+1]), name)
			}
			n, ok := index(tok)
			switch {
			case !ok:
				return nil, fmt.Sprintf("%s: %s is an array: index it with a number from 0, or - to add at the end", Pointer(toks[:i+1]), name)
			case n < len(c):
				cur = c[n]
			case last && forAdd && n == len(c):
				return nil, ""
			default:
				return nil, fmt.Sprintf("%s does not exist: %s has %s%s; add at the end with %s/-",
					Pointer(toks[:i+1]), name, items(len(c)), itemRange(len(c)), at)
			}
		default:
			return nil, fmt.Sprintf("%s does not exist: %s is %s, which has no members", Pointer(toks[:i+1]), name, show(c))
		}
	}
	return cur, ""
}

func items(n int) string {
	if n == 1 {
		return "1 item"
	}
	return fmt.Sprintf("%d items", n)
}

func itemRange(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (0 to %d)", n-1)
}

// show writes a value for a message, shortened.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clip(string(b))
}

func clip(s string) string { return words.Clip(s, maxShownValueSize) }

// marshal is json.Marshal without HTML escapes: values keep the bytes
// the model wrote ("price < 500", not "price \u003c 500").
func marshal(v any) ([]byte, error) { return agent.MarshalPlain(v) }

func invalid(format string, args ...any) error {
	return agent.Errorf(agent.CodeInvalid, format, args...)
}

// object decodes a JSON object into its members, refusing repeated keys
// (which encoding/json would silently resolve to the last).
func object(raw []byte, what string) (map[string]json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, invalid("%s must be a JSON object, not %s", what, kindOf(raw))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, invalid("%s: %v", what, err)
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, invalid("%s is not valid JSON: %v", what, err)
		}
		key, _ := tok.(string) // object keys are strings
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, invalid("%s.%s is not valid JSON: %v", what, key, err)
		}
		if _, dup := out[key]; dup {
			return nil, invalid("%s has %q twice", what, key)
		}
		out[key] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, invalid("%s is not valid JSON: %v", what, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalid("%s: unexpected data after the object", what)
	}
	return out, nil
}

// known refuses members other than names.
func known(fields map[string]json.RawMessage, prefix string, names ...string) error {
	var unknown []string
	for k := range fields {
		if !slices.Contains(names, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return invalid("unknown field %s%q; the fields are %s", prefix, unknown[0], strings.Join(names, ", "))
}

// str reads a string member; absent is "".
func str(fields map[string]json.RawMessage, name, at string) (string, error) {
	raw, ok := fields[name]
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", invalid("%s must be a string, not %s", at, kindOf(raw))
	}
	return s, nil
}

func strictUnmarshal(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the value")
	}
	return nil
}

// kindOf names a JSON value's type for messages.
func kindOf(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string " + clip(string(raw))
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "the number " + clip(string(raw))
}
