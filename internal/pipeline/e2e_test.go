package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
)

// flightsServer serves a small flight search API, a CSV export and a few
// failures.
func flightsServer(t *testing.T) *httptest.Server {
	t.Helper()
	flights := []map[string]any{
		{"id": "F1", "origin": "NYC", "dest": "LAX", "airline": "Delta", "price": 420},
		{"id": "F2", "origin": "NYC", "dest": "LAX", "airline": "JetBlue", "price": 189.99},
		{"id": "F3", "origin": "NYC", "dest": "SFO", "airline": "United", "price": 150},
		{"id": "F4", "origin": "NYC", "dest": "LAX", "airline": "United", "price": 305},
		{"id": "F5", "origin": "NYC", "dest": "LAX", "airline": "Alaska", "price": 249},
		{"id": "F6", "origin": "BOS", "dest": "LAX", "airline": "Delta", "price": 99},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer test-token" {
			http.Error(w, `{"error": "unauthorized"}`, http.StatusUnauthorized)
			return
		}
		q := r.URL.Query()
		var found []map[string]any
		for _, f := range flights {
			if f["origin"] == q.Get("origin") && f["dest"] == q.Get("dest") {
				found = append(found, f)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"count": len(found), "flights": found})
	})
	mux.HandleFunc("GET /fares.csv", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain") // the URL says CSV
		fmt.Fprint(w, "flight,airline,departs,price,zip\n"+
			"F1,Delta,2024-03-01 08:15,420,02134\n"+
			"F2,JetBlue,2024-03-01 11:40,189.99,10001\n"+
			"F4,United,2024-03-02 06:05,305,\n"+
			"F5,Alaska,2024-03-02 21:30,249,94105\n"+
			"F7,Delta,2024-03-03 09:00,210,02134\n")
	})
	mux.HandleFunc("POST /query", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode([]any{map[string]any{"echo": body}})
	})
	mux.HandleFunc("GET /down", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "maintenance", http.StatusServiceUnavailable)
	})
	mux.HandleFunc("GET /page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html>hello</html>")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// httpFetch is Env.Fetch as a caller writes it: its own client, its own
// size cap, and its own auth header.
func httpFetch(client *http.Client) func(context.Context, Request) (Response, error) {
	return func(ctx context.Context, r Request) (Response, error) {
		req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(r.Body))
		if err != nil {
			return Response{}, err
		}
		req.Header = r.Header.Clone()
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := client.Do(req)
		if err != nil {
			return Response{}, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return Response{}, err
		}
		return Response{StatusCode: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: body}, nil
	}
}

func TestEndToEnd(t *testing.T) {
	srv := flightsServer(t)
	env := Env{Fetch: httpFetch(srv.Client())}
	tests := []struct {
		name    string
		call    string
		want    string // JSON of the preview of 5 rows
		err     string
		errCode agent.Code
	}{
		{
			name: "fetch flights from NYC to LAX, sort by price, show top 3",
			call: call(`[{"step": "http_request", "url": "` + srv.URL + `/search", "params": {"origin": "NYC", "dest": "LAX"}},
				{"step": "table_sort", "field": "price", "order": "asc"}, {"step": "top_k", "k": 3}]`),
			want: `{"kind": "table", "rows": 3, "truncated": false,
				"schema": [{"name": "airline", "types": ["string"]}, {"name": "dest", "types": ["string"]}, {"name": "id", "types": ["string"]}, {"name": "origin", "types": ["string"]}, {"name": "price", "types": ["number"]}],
				"head": [{"id": "F2", "origin": "NYC", "dest": "LAX", "airline": "JetBlue", "price": 189.99},
					{"id": "F5", "origin": "NYC", "dest": "LAX", "airline": "Alaska", "price": 249},
					{"id": "F4", "origin": "NYC", "dest": "LAX", "airline": "United", "price": 305}]}`,
		},
		{
			name: "CSV: dates, a filter, average price per airline",
			call: call(`[{"step": "http_request", "url": "` + srv.URL + `/fares.csv"},
				{"step": "parse_date", "field": "departs", "format": "%Y-%m-%d %H:%M"},
				{"step": "table_filter", "condition": {"field": "departs", "op": ">=", "value": "2024-03-02"}},
				{"step": "groupby", "by": ["airline"], "agg": "avg", "field": "price"},
				{"step": "table_sort", "field": "avg_price"}]`),
			want: `{"kind": "table", "rows": 3, "truncated": false,
				"schema": [{"name": "airline", "types": ["string"]}, {"name": "avg_price", "types": ["number"]}],
				"head": [{"airline": "Delta", "avg_price": 210}, {"airline": "Alaska", "avg_price": 249}, {"airline": "United", "avg_price": 305}]}`,
		},
		{
			name: "CSV keeps zip codes as text",
			call: call(`[{"step": "http_request", "url": "` + srv.URL + `/fares.csv"}, {"step": "table_filter", "condition": {"field": "zip", "op": "=", "value": "02134"}}, {"step": "table_select", "fields": ["flight", "zip"]}]`),
			want: `{"kind": "table", "rows": 2, "truncated": false,
				"schema": [{"name": "flight", "types": ["string"]}, {"name": "zip", "types": ["string"]}],
				"head": [{"flight": "F1", "zip": "02134"}, {"flight": "F7", "zip": "02134"}]}`,
		},
		{
			name: "POST sends params as the JSON body",
			call: call(`[{"step": "http_request", "url": "` + srv.URL + `/query", "method": "POST", "params": {"where": {"price": {"lt": 300}}}}]`),
			want: `{"kind": "table", "rows": 1, "truncated": false, "schema": [{"name": "echo", "types": ["object"]}],
				"head": [{"echo": {"where": {"price": {"lt": 300}}}}]}`,
		},
		{
			name:    "a 404 is the model's to fix",
			call:    call(`[{"step": "http_request", "url": "` + srv.URL + `/nowhere"}]`),
			err:     `step 0 (http_request): GET ` + srv.URL + `/nowhere answered 404 Not Found: 404 page not found`,
			errCode: agent.CodeInvalid,
		},
		{
			name:    "a 503 may pass",
			call:    call(`[{"step": "http_request", "url": "` + srv.URL + `/down"}]`),
			err:     `step 0 (http_request): GET ` + srv.URL + `/down answered 503 Service Unavailable: maintenance`,
			errCode: agent.CodeUnavailable,
		},
		{
			name:    "HTML is not data",
			call:    call(`[{"step": "http_request", "url": "` + srv.URL + `/page"}]`),
			err:     `step 0 (http_request): GET ` + srv.URL + `/page: the body (text/html) is not JSON or CSV: invalid character '<' looking for beginning of value; it starts with: <html>hello</html>`,
			errCode: agent.CodeInvalid,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Decode([]byte(tt.call))
			require.NoError(t, err)
			res, err := Run(t.Context(), p, env)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				require.Equal(t, tt.errCode, agent.ErrorCode(err))
				return
			}
			require.NoError(t, err)
			b, err := json.Marshal(res.Preview(5))
			require.NoError(t, err)
			require.JSONEq(t, tt.want, string(b))
		})
	}
}

func TestHTTPRequest(t *testing.T) {
	t.Run("GET params in the query", func(t *testing.T) {
		req, err := newRequest(Step{Op: OpHTTPRequest, Method: "GET", URL: "https://x.example/s?keep=1&q=old",
			Params: map[string]any{"q": "new", "n": json.Number("3"), "ok": true, "tag": []any{"a", json.Number("2")}}})
		require.NoError(t, err)
		require.Equal(t, "https://x.example/s?keep=1&n=3&ok=true&q=new&tag=a&tag=2", req.URL)
		require.Nil(t, req.Body)
		require.Contains(t, req.Header.Get("Accept"), "application/json")
	})
	t.Run("POST without params sends an empty object", func(t *testing.T) {
		req, err := newRequest(Step{Op: OpHTTPRequest, Method: "POST", URL: "https://x.example/q"})
		require.NoError(t, err)
		require.Equal(t, "{}", string(req.Body))
		require.Equal(t, "application/json", req.Header.Get("Content-Type"))
	})
	t.Run("the caller's error keeps its code", func(t *testing.T) {
		denied := agent.Errorf(agent.CodePermissionDenied, "egress to x.example is not allowed")
		env := Env{Fetch: func(context.Context, Request) (Response, error) { return Response{}, denied }}
		p, err := Decode([]byte(call(`[{"step": "http_request", "url": "https://x.example/a"}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, env)
		require.EqualError(t, err, "step 0 (http_request): GET https://x.example/a: egress to x.example is not allowed")
		require.True(t, errors.Is(err, denied))
		require.Equal(t, agent.CodePermissionDenied, agent.ErrorCode(err))
	})
	t.Run("without Fetch or Load", func(t *testing.T) {
		p, err := Decode([]byte(call(`[{"step": "http_request", "url": "https://x.example/a"}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, Env{})
		require.EqualError(t, err, "step 0 (http_request): http_request is not available here; work from input_ref instead")
		p, err = Decode([]byte(callOn(`[{"step": "top_k", "k": 1}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, Env{})
		require.EqualError(t, err, "input_ref: refs cannot be read here: use http_request or pass the data another way")
	})
	t.Run("a body too big for the limits", func(t *testing.T) {
		body := "[" + strings.Repeat(`{"a": 1},`, 100) + `{"a": 1}]`
		env := Env{
			Fetch: func(context.Context, Request) (Response, error) {
				return Response{StatusCode: 200, Body: []byte(body)}, nil
			},
			Limits: Limits{MaxRows: 50},
		}
		p, err := Decode([]byte(call(`[{"step": "http_request", "url": "https://x.example/a"}, {"step": "top_k", "k": 1}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, env)
		require.EqualError(t, err, "step 0 (http_request): output has 101 rows; the limit is 50: filter or aggregate earlier, or ask the source for fewer")
	})
}

// TestHTTPFiles: response_as file hands Fetch a request for a file and
// makes the kept file the step's output, a document that names it, and
// one of the run's files; body_ref asks Fetch to send a stored file,
// with params in the query string.
func TestHTTPFiles(t *testing.T) {
	var got []Request
	env := Env{Fetch: func(_ context.Context, req Request) (Response, error) {
		got = append(got, req)
		if req.AsFile {
			return Response{StatusCode: 200, ContentType: "application/pdf",
				File: &File{Ref: "cas://sha256:" + strings.Repeat("ab", 32), ContentType: "application/pdf", Size: 52 << 20, Name: "report.pdf"}}, nil
		}
		return Response{StatusCode: 200, ContentType: "application/json", Body: []byte(`{"pages": 12}`)}, nil
	}}

	p, err := Decode([]byte(call(`[{"step": "http_request", "url": "https://files.example/report.pdf", "response_as": "file"}, {"step": "jq_transform", "query": ".size"}]`)))
	require.NoError(t, err)
	res, err := Run(t.Context(), p, env)
	require.NoError(t, err)
	require.True(t, got[0].AsFile)
	require.Equal(t, "*/*", got[0].Header.Get("Accept"))
	require.Equal(t, []File{{Ref: "cas://sha256:" + strings.Repeat("ab", 32), ContentType: "application/pdf", Size: 52 << 20, Name: "report.pdf"}}, res.Files)
	out, err := json.Marshal(res.Value)
	require.NoError(t, err)
	require.Equal(t, "54525952", string(out))

	p, err = Decode([]byte(call(`[{"step": "http_request", "url": "https://ocr.example/scan?v=1", "method": "POST", "body_ref": "previous_results[0]", "params": {"lang": "en"}}]`)))
	require.NoError(t, err)
	res, err = Run(t.Context(), p, env)
	require.NoError(t, err)
	req := got[1]
	require.Equal(t, "previous_results[0]", req.BodyRef)
	require.Equal(t, "https://ocr.example/scan?lang=en&v=1", req.URL)
	require.Nil(t, req.Body)
	require.False(t, req.AsFile)
	require.Empty(t, res.Files)
	out, err = json.Marshal(res.Value)
	require.NoError(t, err)
	require.JSONEq(t, `{"pages": 12}`, string(out))

	t.Run("an answer other than 2xx is an error", func(t *testing.T) {
		env := Env{Fetch: func(context.Context, Request) (Response, error) {
			return Response{StatusCode: 404, Body: []byte("no such report")}, nil
		}}
		p, err := Decode([]byte(call(`[{"step": "http_request", "url": "https://files.example/gone.pdf", "response_as": "file"}]`)))
		require.NoError(t, err)
		_, err = Run(t.Context(), p, env)
		require.EqualError(t, err, "step 0 (http_request): GET https://files.example/gone.pdf answered 404 Not Found: no such report")
	})
}
