package crm

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// do sends a request to a and returns the status and body.
func do(t *testing.T, a *API, method, target, body string, header map[string]string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	a.ServeHTTP(w, r)
	return w.Code, strings.TrimSpace(w.Body.String())
}

func TestDocument(t *testing.T) {
	var fromYAML, fromJSON map[string]any
	require.NoError(t, yaml.Unmarshal(DocumentYAML(), &fromYAML))
	require.NoError(t, json.Unmarshal(DocumentJSON(), &fromJSON))
	y, err := json.Marshal(fromYAML)
	require.NoError(t, err)
	require.JSONEq(t, string(y), string(DocumentJSON()), "the two forms are one document")

	a := New()
	for _, path := range []string{"/openapi.json", "/openapi.yaml"} {
		status, _ := do(t, a, http.MethodGet, path, "", nil)
		require.Equal(t, http.StatusOK, status, path)
	}
}

func TestAPI(t *testing.T) {
	a := New()
	for _, tt := range []struct {
		name, method, target, body string
		status                     int
		want                       string
	}{
		{"a customer", "GET", "/v2/customers/2", "", 200,
			`{"id":2,"name":"Alan Turing","email":"alan.turing@example.com","tier":"enterprise"}`},
		{"a legacy tier", "GET", "/v2/customers/13", "", 200,
			`{"id":13,"name":"Grace Hopper II","email":"grace.hopper.ii@example.com","tier":"legacy"}`},
		{"no such customer", "GET", "/v2/customers/21", "", 404, `{"error":"no customer 21"}`},
		{"not an id", "GET", "/v2/customers/x", "", 400, `{"error":"customerId must be an integer"}`},
		{"orders, newest first", "GET", "/v2/customers/1/orders", "", 200,
			`[{"id":"O-101","customerId":1,"status":"shipped","items":[{"sku":"SKU-3","qty":2}]},{"id":"O-100","customerId":1,"status":"shipped","items":[{"sku":"SKU-2","qty":1}]}]`},
		{"search needs q", "GET", "/v2/customers?limit=2", "", 400, `{"error":"q is required"}`},
		{"a bad limit", "GET", "/v2/customers?q=a&limit=99", "", 400, `{"error":"limit must be an integer from 1 to 50"}`},
		{"an order without items", "POST", "/v2/orders", `{"customerId":1,"items":[]}`, 400, `{"error":"an order needs items"}`},
		{"cancel a shipped order", "DELETE", "/v2/orders/O-100", "", 409, `{"error":"order O-100 is shipped, not open"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, body := do(t, a, tt.method, tt.target, tt.body, nil)
			require.Equal(t, tt.status, status, body)
			require.JSONEq(t, tt.want, body)
		})
	}
}

// TestIdempotencyKey: the same key places one order; another key or none
// places another.
func TestIdempotencyKey(t *testing.T) {
	a := New()
	seed := len(a.Orders())
	order := `{"customerId":5,"items":[{"sku":"SKU-1","qty":1}]}`
	key := map[string]string{"Idempotency-Key": "k1"}
	status, first := do(t, a, "POST", "/v2/orders", order, key)
	require.Equal(t, http.StatusCreated, status, first)
	status, again := do(t, a, "POST", "/v2/orders", order, key)
	require.Equal(t, http.StatusCreated, status)
	require.JSONEq(t, first, again)
	require.Len(t, a.Orders(), seed+1)

	_, other := do(t, a, "POST", "/v2/orders", order, map[string]string{"Idempotency-Key": "k2"})
	require.NotEqual(t, first, other)
	_, _ = do(t, a, "POST", "/v2/orders", order, nil)
	require.Len(t, a.Orders(), seed+3)

	var o Order
	require.NoError(t, json.Unmarshal([]byte(first), &o))
	status, _ = do(t, a, "DELETE", "/v2/orders/"+o.ID, "", nil)
	require.Equal(t, http.StatusNoContent, status)
}
