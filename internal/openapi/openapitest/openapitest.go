// Package openapitest makes large OpenAPI documents for tests, and serves
// the small API two of their operations describe. Only tests import it.
//
// It imports nothing of agentflow's.
//
// Large(n) is a document of at least n bytes, like GitHub's REST
// description in shape: thousands of paths and components nobody asks
// for, and two operations a test narrows to, whose components refer to
// each other in a chain:
//
//	getWidget    GET  /widgets/{widgetId}
//	  parameters/WidgetId, responses/WidgetResponse → schemas/Widget
//	  → schemas/Owner → schemas/Address → schemas/Country
//	createWidget POST /widgets
//	  requestBodies/NewWidget → schemas/NewWidget → schemas/WidgetKind,
//	  responses/WidgetResponse
//
// Both need the apiKey security scheme (the document's own security);
// Unused, FillerN, FillerParamN and the oauth scheme belong to nothing
// they call, and WidgetExample is an example of their answer.
package openapitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// The operations a test narrows to, and the components they need.
var (
	Wanted = []string{"getWidget", "createWidget"}
	Needed = []string{"parameters/WidgetId", "responses/WidgetResponse", "requestBodies/NewWidget",
		"schemas/Widget", "schemas/Owner", "schemas/Address", "schemas/Country", "schemas/NewWidget",
		"schemas/WidgetKind", "securitySchemes/apiKey"}
	// Unneeded are components the document has that the two do not need.
	// (An example is needed by nothing: narrowing leaves examples out.)
	Unneeded = []string{"schemas/Unused", "schemas/Filler1", "parameters/FillerParam1", "securitySchemes/oauth", "examples/WidgetExample"}
)

const head = `{"openapi":"3.0.3","info":{"title":"Widgets","version":"1"},"servers":[{"url":"/api"}],` +
	`"security":[{"apiKey":[]}],"tags":[{"name":"widgets"}],"paths":{` +
	`"/widgets/{widgetId}":{"parameters":[{"$ref":"#/components/parameters/WidgetId"}],"get":{"operationId":"getWidget","summary":"Get a widget.",` +
	`"responses":{"200":{"$ref":"#/components/responses/WidgetResponse"}}}},` +
	`"/widgets":{"post":{"operationId":"createWidget","summary":"Make a widget.","requestBody":{"$ref":"#/components/requestBodies/NewWidget"},` +
	`"responses":{"201":{"$ref":"#/components/responses/WidgetResponse"}}},` +
	`"get":{"operationId":"listWidgets","responses":{"200":{"description":"widgets","content":{"application/json":{"schema":{"type":"array","items":{"$ref":"#/components/schemas/Unused"}}}}}}}}`

const components = `"components":{"parameters":{"WidgetId":{"name":"widgetId","in":"path","required":true,"schema":{"type":"integer","minimum":1}}%s},` +
	`"responses":{"WidgetResponse":{"description":"a widget","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Widget"},"examples":{"one":{"$ref":"#/components/examples/WidgetExample"}}}}}},` +
	`"examples":{"WidgetExample":{"value":{"id":1,"name":"sprocket","owner":{"name":"Ada"}}}},` +
	`"requestBodies":{"NewWidget":{"required":true,"content":{"application/json":{"schema":{"$ref":"#/components/schemas/NewWidget"}}}}},` +
	`"securitySchemes":{"apiKey":{"type":"apiKey","in":"header","name":"X-Api-Key"},"oauth":{"type":"oauth2","flows":{"implicit":{"authorizationUrl":"https://auth.example/a","scopes":{}}}}},` +
	`"schemas":{` +
	`"Widget":{"type":"object","required":["id","name","owner"],"properties":{"id":{"type":"integer"},"name":{"type":"string"},"kind":{"$ref":"#/components/schemas/WidgetKind"},"owner":{"$ref":"#/components/schemas/Owner"}}},` +
	`"Owner":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"address":{"$ref":"#/components/schemas/Address"}}},` +
	`"Address":{"type":"object","properties":{"city":{"type":"string"},"country":{"$ref":"#/components/schemas/Country"}}},` +
	`"Country":{"type":"string","enum":["NL","FR","JP"]},` +
	`"NewWidget":{"type":"object","required":["name"],"additionalProperties":false,"properties":{"name":{"type":"string","minLength":1},"kind":{"$ref":"#/components/schemas/WidgetKind"}}},` +
	`"WidgetKind":{"type":"string","enum":["gear","spring"]},` +
	`"Unused":{"type":"object","properties":{"x":{"type":"string"}}}%s}}}`

// filler is one path of the document that nobody asks for, about 2 KiB
// with its two components.
func filler(b *bytes.Buffer, i int) {
	pad := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 8)
	fmt.Fprintf(b, `,"/filler/%d/{id}":{"get":{"operationId":"fillerGet%d","summary":"Filler %d.","description":%q,`+
		`"parameters":[{"$ref":"#/components/parameters/FillerParam%d"}],`+
		`"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"$ref":"#/components/schemas/Filler%d"}}}}}},`+
		`"delete":{"operationId":"fillerDelete%d","parameters":[{"$ref":"#/components/parameters/FillerParam%d"}],"responses":{"204":{"description":"gone"}}}}`,
		i, i, i, pad, i, i, i, i)
}

// Large returns a document (JSON) of at least n bytes.
func Large(n int) []byte {
	var b bytes.Buffer
	b.Grow(n + 64<<10)
	b.WriteString(head)
	paths := 0
	for b.Len() < n*3/5 {
		paths++
		filler(&b, paths)
	}
	b.WriteString("},")
	var params, schemas bytes.Buffer
	for i := 1; i <= paths; i++ {
		fmt.Fprintf(&params, `,"FillerParam%d":{"name":"id","in":"path","required":true,"schema":{"type":"string"}}`, i)
	}
	pad := strings.Repeat("Sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. ", 6)
	count := 0
	for count < paths || b.Len()+params.Len()+schemas.Len() < n {
		count++
		// Fillers refer to the next in chains of ten: narrowing must not
		// follow a chain from a component nobody needs.
		next := ""
		if count%10 != 0 {
			next = fmt.Sprintf(`,"next":{"$ref":"#/components/schemas/Filler%d"}`, count+1)
		}
		fmt.Fprintf(&schemas, `,"Filler%d":{"type":"object","description":%q,"properties":{"a":{"type":"string"},"b":{"type":"integer"}%s}}`, count, pad, next)
	}
	fmt.Fprintf(&schemas, `,"Filler%d":{"type":"object"}`, count+1)
	fmt.Fprintf(&b, components, params.String(), schemas.String())
	return b.Bytes()
}

// Widget is the API's widget.
type Widget struct {
	ID    int    `json:"id"`
	Name  string `json:"name"`
	Kind  string `json:"kind,omitempty"`
	Owner Owner  `json:"owner"`
}

// Owner is a widget's owner.
type Owner struct {
	Name    string   `json:"name"`
	Address *Address `json:"address,omitempty"`
}

// Address is where an owner lives.
type Address struct {
	City    string `json:"city,omitempty"`
	Country string `json:"country,omitempty"`
}

// API serves getWidget and createWidget under /api, for the key Key.
type API struct {
	Key string

	mu      sync.Mutex
	widgets map[int]Widget
}

// NewAPI returns an API with widget 1, owned by Ada in Paris.
func NewAPI(key string) *API {
	return &API{Key: key, widgets: map[int]Widget{1: {ID: 1, Name: "sprocket", Kind: "gear",
		Owner: Owner{Name: "Ada", Address: &Address{City: "Paris", Country: "FR"}}}}}
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("X-Api-Key") != a.Key {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"a valid X-Api-Key is required"}`))
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	var id int
	switch {
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/api/widgets/"):
		if _, err := fmt.Sscanf(r.URL.Path, "/api/widgets/%d", &id); err != nil {
			http.Error(w, `{"error":"bad id"}`, http.StatusBadRequest)
			return
		}
		wd, ok := a.widgets[id]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"error":"no widget %d"}`, id)
			return
		}
		_ = json.NewEncoder(w).Encode(wd)
	case r.Method == http.MethodPost && r.URL.Path == "/api/widgets":
		var in struct{ Name, Kind string }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Name == "" {
			http.Error(w, `{"error":"a name is required"}`, http.StatusBadRequest)
			return
		}
		wd := Widget{ID: len(a.widgets) + 1, Name: in.Name, Kind: in.Kind, Owner: Owner{Name: "Ada"}}
		a.widgets[wd.ID] = wd
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(wd)
	default:
		http.NotFound(w, r)
	}
}
