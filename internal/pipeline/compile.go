package pipeline

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/itchyny/gojq"
	"github.com/itchyny/timefmt-go"

	"github.com/agentflow/agentflow/internal/words"
)

// withDefaults returns p with the defaults of empty fields written in. It
// copies the steps so that p's caller keeps its own.
func (p Pipeline) withDefaults() Pipeline {
	p.Steps = slices.Clone(p.Steps)
	for i := range p.Steps {
		s := &p.Steps[i]
		switch s.Op {
		case OpHTTPRequest:
			s.Method = cmp.Or(s.Method, "GET")
		case OpTableSort:
			s.Order = cmp.Or(s.Order, "asc")
		case OpJoin:
			s.How = cmp.Or(s.How, "inner")
		}
	}
	return p
}

// step is a checked step, ready to run.
type step struct {
	Step
	index int
	re    *regexp.Regexp
}

// compile checks p (defaults filled in) and returns its steps ready to run.
func compile(p Pipeline) ([]step, error) {
	p = p.withDefaults()
	if len(p.Steps) == 0 {
		return nil, invalidf("pipeline is empty; give at least one step")
	}
	if len(p.Steps) > maxSteps {
		return nil, invalidf("pipeline has %d steps; the limit is %d", len(p.Steps), maxSteps)
	}
	if len(p.InputRef) > maxNameBytes {
		return nil, invalidf("input_ref is longer than %d bytes", maxNameBytes)
	}
	out := make([]step, len(p.Steps))
	for i, s := range p.Steps {
		c, err := compileStep(s, i, i > 0 || p.InputRef != "")
		if err != nil {
			return nil, &StepError{Index: i, Op: s.Op, Err: err}
		}
		out[i] = c
	}
	return out, nil
}

// compileStep checks one step; hasInput says whether an earlier step or
// input_ref gives it an input.
func compileStep(s Step, i int, hasInput bool) (step, error) {
	c := step{Step: s, index: i}
	spec, ok := specs[s.Op]
	if !ok {
		return c, invalidf("step %q: want one of %s", s.Op, opList())
	}
	for _, name := range s.present() {
		if !spec.allows(name) {
			return c, unknownField(s.Op, name)
		}
	}
	needsInput := s.Op != OpHTTPRequest && !(s.Op == OpJoin && s.Left != "")
	if needsInput && !hasInput {
		return c, invalidf("has no input: start the pipeline with http_request, or give input_ref")
	}
	var err error
	switch s.Op {
	case OpHTTPRequest:
		err = checkHTTP(s, i, hasInput)
	case OpTableSort:
		err = cmp.Or(checkName("field", s.Field), checkEnum("order", s.Order, "asc", "desc"))
	case OpTableFilter:
		err = checkCondition(s.Condition)
	case OpTableSelect:
		err = checkNames("fields", s.Fields, false)
	case OpTopK:
		if s.K < 1 {
			err = invalidf("k: want %s, got %d", wants["k"], s.K)
		}
	case OpGroupBy:
		err = checkGroupBy(s)
	case OpJoin:
		err = checkJoin(s, i, hasInput)
	case OpJQTransform:
		err = checkJQ(s.Query)
	case OpRegexExtract:
		if err = checkName("field", s.Field); err == nil {
			c.re, err = compileRegexp(s.Pattern)
		}
	case OpParseDate:
		err = cmp.Or(checkName("field", s.Field), checkFormat(s.Format))
	}
	return c, err
}

// present names the fields of s that are set.
func (s Step) present() []string {
	var out []string
	add := func(name string, set bool) {
		if set {
			out = append(out, name)
		}
	}
	add("url", s.URL != "")
	add("method", s.Method != "")
	add("params", s.Params != nil)
	add("response_as", s.ResponseAs != "")
	add("body_ref", s.BodyRef != "")
	add("field", s.Field != "")
	add("order", s.Order != "")
	add("condition", s.Condition != nil)
	add("fields", s.Fields != nil)
	add("k", s.K != 0)
	add("by", s.By != nil)
	add("agg", s.Agg != "")
	add("left", s.Left != "")
	add("right", s.Right != "")
	add("on", s.On != "")
	add("how", s.How != "")
	add("query", s.Query != "")
	add("pattern", s.Pattern != "")
	add("format", s.Format != "")
	return out
}

func checkName(label, name string) error {
	switch {
	case name == "":
		return invalidf("%s: want a field name, got \"\"", label)
	case len(name) > maxNameBytes:
		return invalidf("%s: a field name is at most %d bytes", label, maxNameBytes)
	}
	return nil
}

// checkNames checks a list of field names; empty says whether it may be
// empty.
func checkNames(label string, names []string, empty bool) error {
	if len(names) == 0 && !empty {
		return invalidf("%s: want at least one field name", label)
	}
	if len(names) > maxFieldsCount {
		return invalidf("%s: at most %d field names", label, maxFieldsCount)
	}
	for j, n := range names {
		if err := checkName(fmt.Sprintf("%s[%d]", label, j), n); err != nil {
			return err
		}
		if slices.Index(names, n) < j {
			return invalidf("%s: %q is named twice", label, n)
		}
	}
	return nil
}

func checkEnum(label, v string, allowed ...string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	return invalidf("%s %q: want %s", label, v, quoteList(allowed))
}

func quoteList(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	if len(q) == 2 {
		return q[0] + " or " + q[1]
	}
	return "one of " + strings.Join(q, ", ")
}

func checkHTTP(s Step, i int, hasInput bool) error {
	if i > 0 {
		return invalidf("must be the first step: a fetch here would throw away the output of step %d; to combine data, join stored results by ref", i-1)
	}
	if hasInput {
		return invalidf("the pipeline has input_ref, which is already the input of step 0; drop input_ref or this http_request")
	}
	if len(s.URL) > maxURLBytes {
		return invalidf("url is longer than %d bytes", maxURLBytes)
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalidf("url %q: want %s, e.g. https://api.example.com/items", words.Clip(s.URL, 100), wants["url"])
	}
	if err := checkEnum("method", s.Method, "GET", "POST"); err != nil {
		return err
	}
	if s.ResponseAs != "" {
		if err := checkEnum("response_as", s.ResponseAs, ResponseData, ResponseFile); err != nil {
			return err
		}
	}
	if s.BodyRef != "" {
		switch {
		case s.Method != "POST":
			return invalidf(`body_ref sends a file as the body of a POST: give "method": "POST"`)
		case len(s.BodyRef) > maxNameBytes:
			return invalidf("body_ref: a ref is at most %d bytes", maxNameBytes)
		}
	}
	if s.Method != "GET" && s.BodyRef == "" {
		return nil
	}
	for _, k := range sortedKeys(s.Params) {
		v := s.Params[k]
		ok := isScalar(v)
		if arr, isArr := v.([]any); isArr {
			ok = !slices.ContainsFunc(arr, func(e any) bool { return !isScalar(e) })
		}
		if !ok {
			if s.BodyRef != "" {
				return invalidf("params.%s: a POST with body_ref sends params in the query string, so each is a string, number, boolean or an array of them, got %s", k, describe(v))
			}
			return invalidf("params.%s: a GET sends params in the query string, so each is a string, number, boolean or an array of them, got %s; use method POST to send a JSON body", k, describe(v))
		}
	}
	return nil
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, bool, json.Number, float64, int, int64:
		return true
	}
	return false
}

func checkCondition(c *Condition) error {
	if c == nil {
		return invalidf("missing \"condition\": want %s", wants["condition"])
	}
	if err := checkName("condition.field", c.Field); err != nil {
		return err
	}
	if !slices.Contains(condOps, c.Op) {
		return invalidf("condition.op %q: want one of %s", c.Op, strings.Join(condOps, " "))
	}
	switch c.Op {
	case "in":
		arr, ok := c.Value.([]any)
		if !ok {
			return invalidf(`condition.value: "in" takes an array of values, e.g. ["NYC", "BOS"], got %s`, describe(c.Value))
		}
		for j, e := range arr {
			if e != nil && !isScalar(e) {
				return invalidf(`condition.value[%d]: "in" takes strings, numbers, booleans or null, got %s`, j, describe(e))
			}
		}
	case "<", "<=", ">", ">=":
		if _, isNum := toNumber(c.Value); !isNum {
			if _, isStr := c.Value.(string); !isStr {
				return invalidf("condition.value: %q compares with a number or a string, got %s", c.Op, describe(c.Value))
			}
		}
	case "contains":
		if c.Value == nil || !isScalar(c.Value) {
			return invalidf(`condition.value: "contains" takes a string (found in strings) or a string, number or boolean (found in arrays), got %s`, describe(c.Value))
		}
	default: // = !=
		if c.Value != nil && !isScalar(c.Value) {
			return invalidf("condition.value: %q compares with a string, number, boolean or null, got %s; use \"in\" for a list of values", c.Op, describe(c.Value))
		}
	}
	return nil
}

func checkGroupBy(s Step) error {
	if !slices.Contains(aggs, s.Agg) {
		return invalidf("agg %q: want one of %s", s.Agg, strings.Join(aggs, " "))
	}
	if err := checkNames("by", s.By, true); err != nil {
		return err
	}
	if s.Agg != "count" {
		if s.Field == "" {
			return invalidf("%s needs field: the field to aggregate, e.g. {\"agg\": %q, \"field\": \"price\"}", s.Agg, s.Agg)
		}
		if err := checkName("field", s.Field); err != nil {
			return err
		}
	} else if s.Field != "" {
		if err := checkName("field", s.Field); err != nil {
			return err
		}
	}
	if name := aggName(s.Agg, s.Field); slices.Contains(s.By, name) {
		return invalidf("by: %q is also the name of the aggregate; group by another field", name)
	}
	return nil
}

func checkJoin(s Step, i int, hasInput bool) error {
	if s.Left != "" && hasInput {
		from := "input_ref"
		if i > 0 {
			from = fmt.Sprintf("the output of step %d", i-1)
		}
		return invalidf("left is set but the step already has an input (%s); omit left to join that input with right", from)
	}
	for _, r := range []struct{ label, v string }{{"left", s.Left}, {"right", s.Right}} {
		if len(r.v) > maxNameBytes {
			return invalidf("%s: a ref is at most %d bytes", r.label, maxNameBytes)
		}
	}
	if s.Right == "" {
		return invalidf("right: want a ref, got \"\"")
	}
	return cmp.Or(checkName("on", s.On), checkEnum("how", s.How, "inner", "left"))
}

// checkJQ compiles a query to check it; it runs in a child process,
// which compiles it again (in microseconds).
func checkJQ(q string) error {
	if strings.TrimSpace(q) == "" {
		return invalidf("query: want a jq query such as .items, got \"\"")
	}
	if len(q) > maxQueryBytes {
		return invalidf("query is longer than %d bytes", maxQueryBytes)
	}
	parsed, err := gojq.Parse(q)
	if err != nil {
		if pe, ok := errors.AsType[*gojq.ParseError](err); ok {
			return invalidf("query %q: %v at byte %d", words.Clip(q, 200), err, pe.Offset)
		}
		return invalidf("query %q: %v", words.Clip(q, 200), err)
	}
	if _, err := gojq.Compile(parsed); err != nil {
		return invalidf("query %q: %v", words.Clip(q, 200), err)
	}
	return nil
}

func compileRegexp(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, invalidf("pattern: want %s, got \"\"", wants["pattern"])
	}
	if len(pattern) > maxPatternBytes {
		return nil, invalidf("pattern is longer than %d bytes", maxPatternBytes)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		var se *syntax.Error
		msg := err.Error()
		if errors.As(err, &se) {
			msg = fmt.Sprintf("%s: `%s`", se.Code, se.Expr)
			if se.Code == syntax.ErrInvalidPerlOp || se.Code == syntax.ErrInvalidEscape {
				msg += " (Go regular expressions (RE2) have no lookaround and no backreferences)"
			}
		}
		return nil, invalidf("pattern %q: %s", words.Clip(pattern, 200), msg)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, invalidf("pattern %q: %v", words.Clip(pattern, 200), err)
	}
	prog, err := syntax.Compile(parsed.Simplify())
	if err != nil {
		return nil, invalidf("pattern %q: %v", words.Clip(pattern, 200), err)
	}
	if n := len(prog.Inst); n > maxPatternInst {
		return nil, invalidf("pattern %q is too complex (it compiles to %d instructions; the limit is %d): use smaller repeat counts", words.Clip(pattern, 200), n, maxPatternInst)
	}
	return re, nil
}

// formatCheckTime is formatted and parsed back to check a format's
// directives; its fields are all different so that a swapped directive
// shows.
var formatCheckTime = time.Date(2023, 11, 14, 22, 13, 20, 123456000, time.UTC)

func checkFormat(format string) error {
	switch {
	case format == "":
		return invalidf("format: want %s, got \"\"", wants["format"])
	case len(format) > maxFormatBytes:
		return invalidf("format is longer than %d bytes", maxFormatBytes)
	case !strings.Contains(format, "%"):
		return invalidf("format %q has no %% directive; write strftime directives, e.g. %%Y-%%m-%%d %%H:%%M:%%S for 2024-03-01 14:30:00", format)
	}
	if _, err := timefmt.Parse(timefmt.Format(formatCheckTime, format), format); err != nil {
		return invalidf("format %q: %s", format, timefmtReason(err))
	}
	return nil
}

// timefmtReason keeps the reason of a timefmt error, which starts by
// repeating the input and the format.
func timefmtReason(err error) string {
	msg := err.Error()
	if i := strings.LastIndex(msg, ": "); i >= 0 {
		return msg[i+2:]
	}
	return msg
}
