package pipeline

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// httpRequest runs an http_request step.
func (e *engine) httpRequest(ctx context.Context, s step) (Value, error) {
	if e.env.Fetch == nil {
		return Value{}, invalidf("http_request is not available here; work from input_ref instead")
	}
	req, err := newRequest(s.Step)
	if err != nil {
		return Value{}, err
	}
	resp, err := e.env.Fetch(ctx, req)
	if err != nil {
		return Value{}, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		code := agent.CodeInvalid
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode == http.StatusTooManyRequests {
			code = agent.CodeUnavailable
		}
		return Value{}, agent.Errorf(code, "%s %s answered %d %s: %s", req.Method, req.URL, resp.StatusCode, http.StatusText(resp.StatusCode), snippet(resp.Body))
	}
	if req.AsFile {
		if resp.File == nil {
			return Value{}, fmt.Errorf("%s %s: the response was not kept as a file", req.Method, req.URL)
		}
		e.files = append(e.files, *resp.File)
		return fileValue(*resp.File), nil
	}
	v, err := Parse(resp.Body, resp.ContentType, req.URL)
	if err != nil {
		return Value{}, fmt.Errorf("%s %s: %w", req.Method, req.URL, err)
	}
	return v, nil
}

// fileValue is the document a response kept as a file stands for:
// {"ref", "content_type", "size", "name"}.
func fileValue(f File) Value {
	doc := map[string]any{"ref": f.Ref, "content_type": f.ContentType, "size": json.Number(strconv.FormatInt(f.Size, 10))}
	if f.Name != "" {
		doc["name"] = f.Name
	}
	return Value{Kind: KindDocument, Doc: doc}
}

// newRequest builds the request of an http_request step: params go in the
// query string of a GET or of a POST that sends a file (arrays as repeated
// keys, replacing the URL's own values of those keys) and make the JSON
// body of any other POST.
func newRequest(s Step) (Request, error) {
	u, err := url.Parse(s.URL)
	if err != nil {
		return Request{}, invalidf("url %q: %v", words.Clip(s.URL, 100), err)
	}
	req := Request{Method: s.Method, Header: http.Header{}, BodyRef: s.BodyRef, AsFile: s.ResponseAs == ResponseFile}
	req.Header.Set("Accept", "application/json, text/csv;q=0.9, */*;q=0.5")
	if req.AsFile {
		req.Header.Set("Accept", "*/*")
	}
	switch {
	case s.Method == http.MethodGet || s.BodyRef != "":
		if len(s.Params) > 0 {
			q := u.Query()
			for k, v := range s.Params {
				q.Del(k)
				if arr, ok := v.([]any); ok {
					for _, e := range arr {
						q.Add(k, queryText(e))
					}
					continue
				}
				q.Set(k, queryText(v))
			}
			u.RawQuery = q.Encode()
		}
	case s.Method == http.MethodPost:
		params := s.Params
		if params == nil {
			params = map[string]any{}
		}
		body, err := json.Marshal(params)
		if err != nil {
			return Request{}, invalidf("params: %v", err)
		}
		req.Body = body
		req.Header.Set("Content-Type", "application/json")
	}
	req.URL = u.String()
	return req, nil
}

func queryText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	}
	if t, ok := text(v); ok {
		return t
	}
	return marshal(v)
}

// snippet is the start of a response body for a message.
func snippet(body []byte) string {
	s := strings.TrimSpace(strings.ToValidUTF8(string(body[:min(len(body), 600)]), "�"))
	if s == "" {
		return "(empty body)"
	}
	return words.Clip(s, 300)
}

// Parse reads a response body or a stored blob as a Value, by the rules
// of the package doc: CSV when contentType (a Content-Type value, may be
// empty) says CSV, or says neither CSV nor JSON and the path of name (the
// URL or ref the data came from) ends in .csv; JSON otherwise.
func Parse(body []byte, contentType, name string) (Value, error) {
	body = bytes.TrimPrefix(body, []byte("\uFEFF"))
	if isCSV(contentType, name) {
		return parseCSV(body)
	}
	return parseJSON(body, contentType)
}

func isCSV(contentType, name string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = strings.ToLower(strings.TrimSpace(strings.Split(contentType, ";")[0]))
	}
	switch {
	case mt == "text/csv" || mt == "application/csv":
		return true
	case mt == "application/json" || mt == "text/json" || strings.HasSuffix(mt, "+json") || strings.Contains(mt, "ndjson") || strings.Contains(mt, "jsonl"):
		return false
	}
	path := name
	if u, err := url.Parse(name); err == nil && u.Path != "" {
		path = u.Path
	}
	return strings.HasSuffix(strings.ToLower(path), ".csv")
}

// parseJSON reads one JSON value, or several in a row (newline-delimited
// JSON) as an array of them.
func parseJSON(body []byte, contentType string) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var values []any
	for {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			what := "the body"
			if contentType != "" {
				what += " (" + contentType + ")"
			}
			return Value{}, invalidf("%s is not JSON or CSV: %v; it starts with: %s", what, err, snippet(body))
		}
		values = append(values, v)
	}
	switch len(values) {
	case 0:
		return Value{}, invalidf("the body is empty")
	case 1:
		return classify(values[0]), nil
	}
	return classify(values), nil
}

// parseCSV reads CSV with a header row (see the package doc for names and
// types).
func parseCSV(body []byte) (Value, error) {
	r := csv.NewReader(bytes.NewReader(body))
	r.FieldsPerRecord = -1
	records, err := r.ReadAll()
	if err != nil {
		return Value{}, invalidf("the CSV is malformed: %v", err)
	}
	if len(records) == 0 {
		return TableOf(nil), nil
	}
	header := columnNames(records[0])
	records = records[1:]
	numeric := make([]bool, len(header))
	for c := range header {
		numeric[c] = true
		seen := false
		for _, rec := range records {
			if c < len(rec) && rec[c] != "" {
				seen = true
				if !isNumeric(rec[c]) {
					numeric[c] = false
					break
				}
			}
		}
		numeric[c] = numeric[c] && seen
	}
	rows := make([]map[string]any, len(records))
	for i, rec := range records {
		if len(rec) > len(header) {
			return Value{}, invalidf("the CSV's row %d has %d cells but its header has %d", i+1, len(rec), len(header))
		}
		row := make(map[string]any, len(header))
		for c, name := range header {
			switch {
			case c >= len(rec) || rec[c] == "":
				row[name] = nil
			case numeric[c]:
				row[name] = json.Number(rec[c])
			default:
				row[name] = rec[c]
			}
		}
		rows[i] = row
	}
	return TableOf(rows), nil
}

// columnNames names CSV columns: empty names become column_N (from 1),
// repeated ones name_2, name_3, ...
func columnNames(header []string) []string {
	out := make([]string, len(header))
	seen := map[string]bool{}
	for i, h := range header {
		name := strings.TrimSpace(h)
		if name == "" || !utf8.ValidString(name) {
			name = fmt.Sprintf("column_%d", i+1)
		}
		base := name
		for n := 2; seen[name]; n++ {
			name = fmt.Sprintf("%s_%d", base, n)
		}
		seen[name] = true
		out[i] = name
	}
	return out
}
