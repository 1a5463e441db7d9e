package openapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// Call is a request built for an operation and checked against the
// document, ready to send (credentials aside).
type Call struct {
	Op      *Operation
	Request *http.Request
	input   *openapi3filter.RequestValidationInput
}

// NewRequest builds the request of a call of the operation args name,
// relative to base (BaseURL), and checks it against the document. Every
// problem is an agent.CodeInvalid error for the model that names the
// operation and the parameter.
func (d *Document) NewRequest(ctx context.Context, base *url.URL, args Args) (*Call, error) {
	op, ok := d.byID[args.OperationID]
	if !ok {
		return nil, d.errNoOperation(args.OperationID)
	}
	b := builder{op: op, query: url.Values{}, header: http.Header{}, pathRaw: map[string]string{}, pathEsc: map[string]string{}}
	if err := b.params(args.Params); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %v", op.ID, err)
	}
	body, contentType, err := b.body(args)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %v", op.ID, err)
	}
	target, err := b.url(base)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %v", op.ID, err)
	}
	var content io.Reader
	if body != nil {
		content = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, target, content)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %v", op.ID, err)
	}
	req.Header = b.header
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "application/json, */*;q=0.8")
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	input := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: b.pathRaw, Route: op.route, Options: checkOptions(),
	}
	if err := openapi3filter.ValidateRequest(ctx, input); err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "%s: %s", op.ID, problems(err))
	}
	return &Call{Op: op, Request: req, input: input}, nil
}

// checkOptions are the options of every check: all problems at once, in
// messages that leave values out.
func checkOptions() *openapi3filter.Options {
	o := &openapi3filter.Options{MultiError: true, IncludeResponseStatus: true}
	o.WithCustomSchemaErrorFunc(func(err *openapi3.SchemaError) string { return err.Reason })
	return o
}

// builder gathers the parts of a request from the arguments.
type builder struct {
	op      *Operation
	query   url.Values
	header  http.Header
	cookies []*http.Cookie
	// pathRaw is each path parameter's serialised value as the checks read
	// it; pathEsc is the same value as it goes in the URL.
	pathRaw, pathEsc map[string]string
}

func (b *builder) params(params map[string]any) error {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !slices.Contains(b.op.Keys, k) {
			return fmt.Errorf("unknown parameter %q; %s", words.Clip(k, 60), paramList(b.op))
		}
	}
	for i, p := range b.op.Params {
		v, ok := params[b.op.Keys[i]]
		if !ok || v == nil {
			continue
		}
		if err := b.param(p, v); err != nil {
			return fmt.Errorf("parameter %q (%s): %v", p.Name, p.In, err)
		}
	}
	return nil
}

// paramList says what parameters an operation takes.
func paramList(op *Operation) string {
	if len(op.Params) == 0 {
		return "the operation takes no parameters"
	}
	var parts []string
	for i, p := range op.Params {
		s := op.Keys[i] + " (" + p.In
		if p.Required {
			s += ", required"
		}
		parts = append(parts, s+")")
	}
	return "its parameters are " + strings.Join(parts, ", ")
}

// param serialises one parameter's value where the document puts it.
func (b *builder) param(p *openapi3.Parameter, v any) error {
	if p.Content != nil {
		// A parameter with content is one value in its media type.
		mt := contentKey(p.Content)
		if !isJSON(mt) {
			return fmt.Errorf("values of media type %s cannot be sent", mt)
		}
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		return b.put(p, []string{string(data)}, string(data))
	}
	sm, err := p.SerializationMethod()
	if err != nil {
		return err
	}
	switch p.In {
	case openapi3.ParameterInPath:
		raw, esc, err := pathText(p.Name, sm, v)
		if err != nil {
			return err
		}
		b.pathRaw[p.Name], b.pathEsc[p.Name] = raw, esc
		return nil
	case openapi3.ParameterInQuery:
		return b.queryParam(p.Name, sm, v)
	case openapi3.ParameterInHeader:
		raw, _, err := styled(v, "", ",", ",", "=", "", false, sm.Explode, identity)
		if err != nil {
			return err
		}
		return b.put(p, nil, raw)
	case openapi3.ParameterInCookie:
		raw, _, err := styled(v, "", ",", ",", ",", "", false, false, identity)
		if err != nil {
			return err
		}
		return b.put(p, nil, raw)
	}
	return fmt.Errorf("parameters in %q cannot be sent", p.In)
}

// put sets a value that is already text: query values, or one value for
// a path, header or cookie.
func (b *builder) put(p *openapi3.Parameter, query []string, one string) error {
	switch p.In {
	case openapi3.ParameterInPath:
		b.pathRaw[p.Name], b.pathEsc[p.Name] = one, url.PathEscape(one)
		return checkSegment(one)
	case openapi3.ParameterInQuery:
		for _, q := range query {
			b.query.Add(p.Name, q)
		}
	case openapi3.ParameterInHeader:
		if strings.ContainsAny(one, "\r\n\x00") {
			return fmt.Errorf("a header value cannot hold line breaks or NUL")
		}
		b.header.Set(p.Name, one)
	case openapi3.ParameterInCookie:
		for i := 0; i < len(one); i++ {
			if c := one[i]; c < 0x20 || c >= 0x7f || c == '"' || c == ';' || c == '\\' {
				return fmt.Errorf("a cookie value cannot hold %q", c)
			}
		}
		b.cookies = append(b.cookies, &http.Cookie{Name: p.Name, Value: one})
	}
	return nil
}

// checkSegment refuses path values that would change the path itself:
// "." and ".." are resolved away by servers even when escaped.
func checkSegment(raw string) error {
	if raw == "." || raw == ".." {
		return fmt.Errorf("%q is not a value a path can carry", raw)
	}
	return nil
}

// pathText renders a path parameter by style (simple, label, matrix).
func pathText(name string, sm *openapi3.SerializationMethod, v any) (raw, esc string, err error) {
	switch sm.Style {
	case openapi3.SerializationSimple:
		raw, esc, err = styled(v, "", ",", ",", "=", "", false, sm.Explode, url.PathEscape)
	case openapi3.SerializationLabel:
		sep := ","
		if sm.Explode {
			sep = "."
		}
		raw, esc, err = styled(v, ".", sep, sep, "=", "", false, sm.Explode, url.PathEscape)
	case openapi3.SerializationMatrix:
		if sm.Explode {
			raw, esc, err = styled(v, ";"+name+"=", ";"+name+"=", ";", "=", ";", true, true, url.PathEscape)
		} else {
			raw, esc, err = styled(v, ";"+name+"=", ",", ",", ",", "", false, false, url.PathEscape)
		}
	default:
		return "", "", fmt.Errorf("style %q cannot be used in a path", sm.Style)
	}
	if err == nil {
		err = checkSegment(raw)
	}
	return raw, esc, err
}

func identity(s string) string { return s }

// styled renders v, a primitive, an array of primitives or an object of
// primitives, in a path, header or cookie style: prefix first, array items
// joined by itemSep, object properties joined by propSep as key and value
// joined by kvSep (",", or "=" when exploded). objPrefix, when set,
// replaces prefix for objects (matrix with explode writes ;k=v;k2=v2).
// raw is the text as read back, esc the text with each value escaped.
func styled(v any, prefix, itemSep, propSep, kvSep, objPrefix string, useObjPrefix, explode bool, escape func(string) string) (raw, esc string, err error) {
	switch v := v.(type) {
	case []any:
		var raws, escs []string
		for i, e := range v {
			s, err := primitive(e)
			if err != nil {
				return "", "", fmt.Errorf("item %d: %v", i, err)
			}
			raws, escs = append(raws, s), append(escs, escape(s))
		}
		return prefix + strings.Join(raws, itemSep), prefix + strings.Join(escs, itemSep), nil
	case map[string]any:
		if !explode {
			kvSep = ","
		}
		if useObjPrefix {
			prefix = objPrefix
		}
		var raws, escs []string
		for _, k := range slices.Sorted(maps.Keys(v)) {
			s, err := primitive(v[k])
			if err != nil {
				return "", "", fmt.Errorf("property %q: %v", words.Clip(k, 40), err)
			}
			raws = append(raws, k+kvSep+s)
			escs = append(escs, escape(k)+kvSep+escape(s))
		}
		return prefix + strings.Join(raws, propSep), prefix + strings.Join(escs, propSep), nil
	default:
		s, err := primitive(v)
		if err != nil {
			return "", "", err
		}
		return prefix + s, prefix + escape(s), nil
	}
}

// queryParam renders a query parameter by style (form, spaceDelimited,
// pipeDelimited, deepObject).
func (b *builder) queryParam(name string, sm *openapi3.SerializationMethod, v any) error {
	switch v := v.(type) {
	case []any:
		items := make([]string, len(v))
		for i, e := range v {
			s, err := primitive(e)
			if err != nil {
				return fmt.Errorf("item %d: %v", i, err)
			}
			items[i] = s
		}
		if sm.Explode {
			for _, s := range items {
				b.query.Add(name, s)
			}
			return nil
		}
		sep := ","
		switch sm.Style {
		case openapi3.SerializationSpaceDelimited:
			sep = " "
		case openapi3.SerializationPipeDelimited:
			sep = "|"
		}
		b.query.Add(name, strings.Join(items, sep))
		return nil
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		var flat []string
		for _, k := range keys {
			s, err := primitive(v[k])
			if err != nil {
				return fmt.Errorf("property %q: %v", words.Clip(k, 40), err)
			}
			switch {
			case sm.Style == openapi3.SerializationDeepObject:
				b.query.Add(name+"["+k+"]", s)
			case sm.Explode:
				b.query.Add(k, s)
			default:
				flat = append(flat, k, s)
			}
		}
		if flat != nil {
			b.query.Add(name, strings.Join(flat, ","))
		}
		return nil
	default:
		s, err := primitive(v)
		if err != nil {
			return err
		}
		b.query.Add(name, s)
		return nil
	}
}

// primitive renders a string, number or boolean as text.
func primitive(v any) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case nil:
		return "", nil
	default:
		return "", fmt.Errorf("want a string, number or boolean, not %s", kindOf(v))
	}
}

// kindOf names a JSON value's type.
func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// body encodes the request body in the first media type of the operation
// that can be sent: JSON, a form, or plain text.
func (b *builder) body(args Args) ([]byte, string, error) {
	rb := b.op.Body
	if !args.HasBody || args.Body == nil {
		return nil, "", nil // a required body is missing: the checks say so
	}
	if rb == nil {
		return nil, "", fmt.Errorf("the operation takes no body")
	}
	mt := bodyType(rb.Content)
	switch {
	case len(rb.Content) == 0 || isJSON(mt):
		data, err := json.Marshal(args.Body)
		if err != nil {
			return nil, "", fmt.Errorf("body: %v", err)
		}
		return data, cmp.Or(mt, "application/json"), nil
	case mt == "application/x-www-form-urlencoded":
		obj, ok := args.Body.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("body: want an object of form fields, not %s", kindOf(args.Body))
		}
		form := url.Values{}
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			switch v := obj[k].(type) {
			case []any:
				for i, e := range v {
					s, err := primitive(e)
					if err != nil {
						return nil, "", fmt.Errorf("body: field %q item %d: %v", words.Clip(k, 40), i, err)
					}
					form.Add(k, s)
				}
			default:
				s, err := primitive(v)
				if err != nil {
					return nil, "", fmt.Errorf("body: field %q: %v", words.Clip(k, 40), err)
				}
				form.Add(k, s)
			}
		}
		return []byte(form.Encode()), mt, nil
	case mt == "text/plain":
		s, ok := args.Body.(string)
		if !ok {
			return nil, "", fmt.Errorf("body: want a string (text/plain), not %s", kindOf(args.Body))
		}
		return []byte(s), mt, nil
	}
	return nil, "", fmt.Errorf("the body's media type (%s) cannot be sent: only JSON, forms and plain text can", strings.Join(slices.Sorted(maps.Keys(rb.Content)), ", "))
}

// bodyType picks the media type a body is sent in: JSON first.
func bodyType(content openapi3.Content) string {
	keys := slices.Sorted(maps.Keys(content))
	for _, want := range []func(string) bool{
		func(mt string) bool { return mt == "application/json" },
		isJSON,
		func(mt string) bool { return mt == "application/x-www-form-urlencoded" },
		func(mt string) bool { return mt == "text/plain" },
	} {
		for _, k := range keys {
			if mt := mediaType(k); want(mt) {
				return mt
			}
		}
	}
	return ""
}

// contentKey is the media type of a parameter's content (it has one).
func contentKey(content openapi3.Content) string {
	for k := range content {
		return mediaType(k)
	}
	return ""
}

func mediaType(key string) string {
	mt, _, err := mime.ParseMediaType(key)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(key))
	}
	return mt
}

func isJSON(mt string) bool {
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// url joins base, the operation's path with its parameters and the query.
func (b *builder) url(base *url.URL) (string, error) {
	var raw, esc strings.Builder
	rest := b.op.Path
	for rest != "" {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			raw.WriteString(rest)
			esc.WriteString(escapeStatic(rest))
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("the path %q has an unclosed {", b.op.Path)
		}
		name := rest[i+1 : i+j]
		raw.WriteString(rest[:i])
		esc.WriteString(escapeStatic(rest[:i]))
		// A missing value leaves the path short: the checks report the
		// parameter as required.
		raw.WriteString(b.pathRaw[name])
		esc.WriteString(b.pathEsc[name])
		rest = rest[i+j+1:]
	}
	u := *base
	u.Path = base.Path + raw.String()
	u.RawPath = base.EscapedPath() + esc.String()
	if u.RawPath == u.Path {
		u.RawPath = ""
	}
	u.RawQuery = b.query.Encode()
	return u.String(), nil
}

// escapeStatic escapes the literal parts of a path template, slashes kept.
func escapeStatic(s string) string { return (&url.URL{Path: s}).EscapedPath() }
