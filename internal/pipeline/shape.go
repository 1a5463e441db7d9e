package pipeline

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
)

// A pipeline's shape is what stays the same between runs that differ only
// in their values: the steps, their fields and operators, the URL. The
// values that may differ — its parameters — are declared here, by step
// kind: an http_request's params and body_ref, a table_filter's value, a
// top_k's k, and the pipeline's input_ref. Two runs of one shape are the same task asked
// with other values, which makes the shape worth keeping as a tool of its
// own (a composite), called with just the parameters.

// Param is a value of a pipeline that may differ between runs of its shape.
type Param struct {
	// Name is what the composite tool calls it: the http_request param's
	// key, the filtered field with _max, _min, _not, _in or _contains, k,
	// input_ref; made unique with _2, _3.
	Name string `json:"name"`
	// Type is its JSON Schema type: string, number, integer, boolean or
	// array. Values of another type are refused.
	Type string `json:"type"`
	// Step is the index of its step; -1 for input_ref.
	Step int `json:"step"`
	// Field says where in the step: "params" (Key names the param),
	// "value" (a table_filter's condition value), "k", "body_ref" or
	// "input_ref".
	Field string `json:"field"`
	Key   string `json:"key,omitempty"`
	// Example is the value of the run the shape was taken from.
	Example any `json:"example,omitempty"`
	// Description says what it is, for the model.
	Description string `json:"description,omitempty"`
}

// Shape is a pipeline's shape: Hash is the same for two pipelines exactly
// when they differ only in the values of Params (with the same types).
type Shape struct {
	Hash   string
	Params []Param
}

// ShapeOf returns the shape of p (decoded, so its defaults are filled in).
func ShapeOf(p Pipeline) Shape {
	p = p.withDefaults()
	p.SessionID = ""
	var params []Param
	names := map[string]int{}
	add := func(base string, prm Param, v any) {
		base = paramName(base)
		names[base]++
		prm.Name = base
		if n := names[base]; n > 1 {
			prm.Name = fmt.Sprintf("%s_%d", base, n)
		}
		prm.Type, prm.Example = jsonSchemaType(v), keyable(v)
		params = append(params, prm)
	}
	if p.InputRef != "" {
		add("input_ref", Param{Step: -1, Field: "input_ref", Description: "the ref of the data to start from"}, p.InputRef)
	}
	for i, s := range p.Steps {
		switch s.Op {
		case OpHTTPRequest:
			for _, k := range sortedKeys(s.Params) {
				add(k, Param{Step: i, Field: "params", Key: k, Description: fmt.Sprintf("the %q parameter of the request to %s", k, s.URL)}, s.Params[k])
			}
			if s.BodyRef != "" {
				add("body_ref", Param{Step: i, Field: "body_ref", Description: fmt.Sprintf("the ref of the file to send to %s", s.URL)}, s.BodyRef)
			}
		case OpTableFilter:
			if c := s.Condition; c != nil {
				add(c.Field+filterSuffix[c.Op], Param{Step: i, Field: "value", Description: fmt.Sprintf("keep rows whose %s %s this", c.Field, c.Op)}, c.Value)
			}
		case OpTopK:
			add("k", Param{Step: i, Field: "k", Description: "how many rows to keep"}, s.K)
		}
	}

	// The hash is over the pipeline with each parameter's value replaced
	// by its name and type.
	b, _ := json.Marshal(p)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc) // p was just encoded
	steps, _ := doc["pipeline"].([]any)
	for _, prm := range params {
		marker := "<param " + prm.Name + " " + prm.Type + ">"
		if prm.Step < 0 {
			doc["input_ref"] = marker
			continue
		}
		step, _ := steps[prm.Step].(map[string]any)
		switch prm.Field {
		case "params":
			step["params"].(map[string]any)[prm.Key] = marker
		case "value":
			step["condition"].(map[string]any)["value"] = marker
		case "k":
			step["k"] = marker
		case "body_ref":
			step["body_ref"] = marker
		}
	}
	canon, _ := json.Marshal(doc) // sorted keys: canonical
	h := sha256.New()
	h.Write([]byte("pipeline-shape/v1\n"))
	h.Write(canon)
	return Shape{Hash: hex.EncodeToString(h.Sum(nil)), Params: params}
}

var filterSuffix = map[string]string{"<": "_max", "<=": "_max", ">": "_min", ">=": "_min", "=": "", "!=": "_not", "in": "_in", "contains": "_contains"}

var nonName = regexp.MustCompile(`[^a-z0-9_]+`)

// paramName makes s a tool argument name: lower case letters, digits and
// underscores, at most 40 bytes.
func paramName(s string) string {
	s = strings.Trim(nonName.ReplaceAllString(strings.ToLower(s), "_"), "_")
	s = cmp.Or(s, "value")
	return s[:min(len(s), 40)]
}

func jsonSchemaType(v any) string {
	switch x := v.(type) {
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case int:
		return "integer"
	case json.Number:
		if _, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return "integer"
		}
		return "number"
	case float64:
		if x == float64(int64(x)) {
			return "integer"
		}
		return "number"
	}
	return "string"
}

// Bind returns p with the parameters of its shape set to values, by name:
// every parameter is required and must have its type; other names are
// refused. The result is checked as Run checks any pipeline.
func (s Shape) Bind(p Pipeline, values map[string]any) (Pipeline, error) {
	for _, k := range sortedKeys(values) {
		if !slices.ContainsFunc(s.Params, func(prm Param) bool { return prm.Name == k }) {
			return Pipeline{}, invalidf("unknown argument %q; the arguments are %s", k, s.names())
		}
	}
	p = p.clone()
	for _, prm := range s.Params {
		v, ok := values[prm.Name]
		if !ok {
			return Pipeline{}, invalidf("missing argument %q (%s): %s", prm.Name, prm.Type, prm.Description)
		}
		if got := jsonSchemaType(v); got != prm.Type && !(prm.Type == "number" && got == "integer") {
			return Pipeline{}, invalidf("argument %q: want %s, got %s", prm.Name, article(prm.Type), describe(v))
		}
		if prm.Step >= len(p.Steps) {
			return Pipeline{}, agent.Errorf(agent.CodeInternal, "parameter %q names step %d of a pipeline of %d", prm.Name, prm.Step, len(p.Steps))
		}
		switch prm.Field {
		case "input_ref":
			p.InputRef, _ = v.(string)
		case "params":
			p.Steps[prm.Step].Params[prm.Key] = v
		case "body_ref":
			p.Steps[prm.Step].BodyRef, _ = v.(string)
		case "value":
			p.Steps[prm.Step].Condition.Value = v
		case "k":
			k, err := strconv.Atoi(fmt.Sprint(v))
			if err != nil {
				return Pipeline{}, invalidf("argument %q: want a whole number, got %s", prm.Name, describe(v))
			}
			p.Steps[prm.Step].K = k
		}
	}
	b, err := json.Marshal(p)
	if err != nil {
		return Pipeline{}, invalidf("arguments: %v", err)
	}
	return Decode(b)
}

func (s Shape) names() string {
	if len(s.Params) == 0 {
		return "none"
	}
	return strings.Join(s.ParamNames(), ", ")
}

// ParamNames are the names of the shape's parameters, in order.
func (s Shape) ParamNames() []string {
	n := make([]string, len(s.Params))
	for i, p := range s.Params {
		n[i] = p.Name
	}
	return n
}

func article(t string) string {
	if t == "integer" || t == "array" {
		return "an " + t
	}
	return "a " + t
}

// clone copies p deeply enough that Bind can set values in the copy.
func (p Pipeline) clone() Pipeline {
	out := p
	out.Steps = slices.Clone(p.Steps)
	for i := range out.Steps {
		s := &out.Steps[i]
		s.Params = maps.Clone(s.Params)
		if s.Condition != nil {
			c := *s.Condition
			s.Condition = &c
		}
	}
	return out
}
