package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/crm"
	"github.com/agentflow/agentflow/internal/openapi/openapitest"
)

// components returns the names of a narrowed document's components, as
// "section/name" ("schemas/Customer"; a Swagger 2.0 document's
// "definitions/Pet"), and its paths.
func components(t *testing.T, doc []byte) (comps, paths []string) {
	t.Helper()
	var d struct {
		Paths       map[string]json.RawMessage            `json:"paths"`
		Components  map[string]map[string]json.RawMessage `json:"components"`
		Definitions map[string]json.RawMessage            `json:"definitions"`
	}
	require.NoError(t, json.Unmarshal(doc, &d))
	for section, names := range d.Components {
		for name := range names {
			comps = append(comps, section+"/"+name)
		}
	}
	for name := range d.Definitions {
		comps = append(comps, "definitions/"+name)
	}
	for p := range d.Paths {
		paths = append(paths, p)
	}
	return comps, paths
}

// TestNarrowLarge: a document of thousands of paths and components,
// narrowed to two operations, keeps those and exactly the components
// they use, transitively; kin-openapi loads and validates the rest.
func TestNarrowLarge(t *testing.T) {
	data := openapitest.Large(4 << 20)
	src, err := ReadBytes(data)
	require.NoError(t, err)
	require.EqualValues(t, len(data), src.Size())
	require.Less(t, len(src.gz), len(data)/8, "kept compressed")

	out, err := src.Narrow(openapitest.Wanted)
	require.NoError(t, err)
	comps, paths := components(t, out)
	require.ElementsMatch(t, openapitest.Needed, comps)
	require.ElementsMatch(t, []string{"/widgets", "/widgets/{widgetId}"}, paths)
	require.NotContains(t, string(out), "listWidgets", "another operation of a kept path is dropped")
	require.NotContains(t, string(out), `"tags"`, "tags are left out")

	doc, err := Load(context.Background(), out)
	require.NoError(t, err)
	require.Equal(t, []string{"createWidget", "getWidget"}, doc.IDs())
	op, _ := doc.Operation("getWidget")
	require.Equal(t, "widgetId", op.Params[0].Name, "the path item's parameter, by reference")

	ops, err := src.Outline()
	require.NoError(t, err)
	require.Greater(t, len(ops), 2000)
	require.Equal(t, OperationInfo{ID: "fillerGet1", Method: "GET", Path: "/filler/1/{id}"}, ops[0])

	// Every operation: the document as it is, less what is left out at
	// the top.
	all, err := src.Narrow(nil)
	require.NoError(t, err)
	comps, _ = components(t, all)
	require.Subset(t, comps, openapitest.Unneeded)
}

// TestNarrowDocuments: narrowing follows references through parameters,
// responses, request bodies and schemas, discriminator mappings and
// security requirements, in OpenAPI 3 (JSON and YAML) and Swagger 2.0.
func TestNarrowDocuments(t *testing.T) {
	for _, tt := range []struct {
		name string
		doc  string
		ids  []string
		want []string // components kept
		ops  []string // as loaded
	}{
		{"YAML, a path item's parameter and an operation's response", string(crm.DocumentYAML()), []string{"getCustomer"},
			[]string{"parameters/CustomerId", "responses/NotFound", "schemas/Customer", "schemas/Tier", "schemas/Order", "schemas/Error", "securitySchemes/apiKey"},
			[]string{"getCustomer"}},
		{"JSON, a request body", string(crm.DocumentJSON()), []string{"createOrder"},
			[]string{"responses/NotFound", "schemas/NewOrder", "schemas/Order", "schemas/Error", "securitySchemes/apiKey"},
			[]string{"createOrder"}},
		{"an operation's own security, and a discriminator's mapping", `{"openapi": "3.0.3", "info": {"title": "Pets", "version": "1"},
			"paths": {"/pets": {"get": {"operationId": "listPets", "security": [{"oauth": ["read"]}],
				"responses": {"200": {"description": "pets", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Pet"}}}}}}},
			"/other": {"get": {"responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Other"}}}}}}}},
			"components": {"securitySchemes": {"oauth": {"type": "oauth2", "flows": {"implicit": {"authorizationUrl": "https://a.example/", "scopes": {"read": "r"}}}}, "key": {"type": "apiKey", "in": "header", "name": "K"}},
			"schemas": {"Pet": {"oneOf": [{"$ref": "#/components/schemas/Cat"}, {"$ref": "#/components/schemas/Dog"}], "discriminator": {"propertyName": "kind", "mapping": {"cat": "Cat", "dog": "#/components/schemas/Dog", "eel": "#/components/schemas/Eel"}}},
				"Cat": {"type": "object", "properties": {"kind": {"type": "string"}}}, "Dog": {"type": "object", "properties": {"kind": {"type": "string"}}},
				"Eel": {"type": "object", "properties": {"kind": {"type": "string"}, "note": {"$ref": "#/components/schemas/Note%2DText"}}},
				"Note-Text": {"type": "string"}, "Other": {"type": "string"}}}}`, []string{"listPets"},
			[]string{"securitySchemes/oauth", "schemas/Pet", "schemas/Cat", "schemas/Dog", "schemas/Eel", "schemas/Note-Text"},
			[]string{"listPets"}},
		{"an operation without an id, by method and path", `{"openapi": "3.1.0", "info": {"title": "T", "version": "1"},
			"paths": {"/a": {"get": {"responses": {"200": {"$ref": "#/components/responses/A"}}}, "post": {"responses": {"200": {"$ref": "#/components/responses/B"}}}}},
			"components": {"responses": {"A": {"description": "a"}, "B": {"description": "b"}}}}`, []string{"GET /a"},
			[]string{"responses/A"}, []string{"GET /a"}},
		{"Swagger 2.0", `{"swagger": "2.0", "info": {"title": "Pets", "version": "1"}, "host": "pets.example", "basePath": "/v1",
			"securityDefinitions": {"key": {"type": "apiKey", "in": "header", "name": "K"}, "basic": {"type": "basic"}},
			"security": [{"key": []}],
			"parameters": {"PetId": {"name": "petId", "in": "path", "required": true, "type": "integer"}, "Limit": {"name": "limit", "in": "query", "type": "integer"}},
			"paths": {"/pets/{petId}": {"get": {"operationId": "getPet", "parameters": [{"$ref": "#/parameters/PetId"}],
				"responses": {"200": {"description": "a pet", "schema": {"$ref": "#/definitions/Pet"}}}}},
				"/pets": {"get": {"operationId": "listPets", "parameters": [{"$ref": "#/parameters/Limit"}], "responses": {"200": {"description": "pets"}}}}},
			"definitions": {"Pet": {"type": "object", "properties": {"owner": {"$ref": "#/definitions/Owner"}}}, "Owner": {"type": "object"}, "Toy": {"type": "object"}}}`,
			[]string{"getPet"}, []string{"definitions/Pet", "definitions/Owner"}, []string{"getPet"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, err := ReadBytes([]byte(tt.doc))
			require.NoError(t, err)
			out, err := src.Narrow(tt.ids)
			require.NoError(t, err)
			comps, _ := components(t, out)
			if strings.Contains(tt.doc, `"swagger"`) {
				require.Contains(t, string(out), `"parameters":{"PetId":`)
				require.NotContains(t, string(out), "Limit")
				require.Contains(t, string(out), `"securityDefinitions":{"key":`)
				require.NotContains(t, string(out), `"basic"`)
			}
			require.ElementsMatch(t, tt.want, comps)
			doc, err := Load(context.Background(), out)
			require.NoError(t, err)
			require.Equal(t, tt.ops, doc.IDs())
		})
	}
}

func TestNarrowErrors(t *testing.T) {
	for _, tt := range []struct {
		name, doc string
		ids       []string
		want      string
	}{
		{"an operation the document lacks", string(crm.DocumentJSON()), []string{"getCustomer", "wipeAll"},
			`operations "wipeAll": the document has no such operation; it has searchCustomers, getCustomer, listOrders, createOrder, cancelOrder`},
		{"two operations of one name", `{"openapi": "3.0.3", "paths": {"/a": {"get": {"operationId": "x"}}, "/b": {"get": {"operationId": "x"}}}}`, []string{"x"},
			`two operations are named "x"`},
		{"not an object", `[1, 2]`, nil, "not an OpenAPI document: want a JSON object"},
		{"not JSON", `{"openapi": "3.0.3", "paths": {"/a": {]}}`, nil, "the document is not valid JSON: invalid character ']'"},
		{"cut short", `{"openapi": "3.0.3", "paths": {"/a": {`, nil, "the document is not valid JSON: it ends early"},
		{"a reference into paths", `{"openapi": "3.0.3", "paths": {"/a": {"get": {"operationId": "a", "parameters": [{"$ref": "#/paths/~1b/get/parameters/0"}]}},
			"/b": {"get": {"parameters": [{"name": "q", "in": "query"}]}}}}`, []string{"a"},
			`$ref "#/paths/~1b/get/parameters/0" points into the document outside its components`},
		{"neither JSON nor YAML", "openapi: [3\n", nil, "the document is neither JSON nor YAML"},
		{"YAML merge keys", "openapi: 3.0.3\nbase: &b {x: 1}\ninfo:\n  <<: *b\n", nil, "line 4: YAML merge keys (<<) are not supported"},
		{"empty", "  \n", nil, "the document is empty"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src, err := ReadBytes([]byte(tt.doc))
			if err == nil {
				_, err = src.Narrow(tt.ids)
			}
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestReadLimits(t *testing.T) {
	doc := crm.DocumentJSON()
	_, err := Read(bytes.NewReader(doc), int64(len(doc)))
	require.NoError(t, err)
	_, err = Read(bytes.NewReader(doc), int64(len(doc))-1)
	var big *TooLargeError
	require.True(t, errors.As(err, &big), "%v", err)
	require.Equal(t, &TooLargeError{Limit: int64(len(doc)) - 1}, big)
	require.EqualError(t, err, "the document is larger than "+strconv.Itoa(len(doc)-1)+" bytes")

	// Aliases cannot expand a small YAML document into a huge one.
	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
		"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
	_, err = Read(strings.NewReader(bomb), 1<<10)
	require.True(t, errors.As(err, &big), "%v", err)
	require.EqualError(t, err, "the YAML document is larger than 2048 bytes as JSON")

	// YAML's own numbers and keys are JSON's; the version stays a string.
	src, err := ReadBytes([]byte("openapi: 3.1\ninfo: {title: t, version: 1.0}\npaths:\n  /a:\n    get:\n      responses:\n        200: {description: ok}\n" +
		"x-when: 2024-01-02\nx-n: [1, 0x10, 1.5, true, null, ~]\n"))
	require.NoError(t, err)
	data, err := src.JSON()
	require.NoError(t, err)
	require.JSONEq(t, `{"openapi": "3.1", "info": {"title": "t", "version": 1.0}, "paths": {"/a": {"get": {"responses": {"200": {"description": "ok"}}}}},
		"x-when": "2024-01-02", "x-n": [1, 16, 1.5, true, null, null]}`, string(data))
	require.Len(t, src.Sum(), 64)
}

func TestScanRefs(t *testing.T) {
	var got []string
	scanRefs([]byte(`{"a": {"$ref": "#/components/schemas/A"}, "b": ["$ref", {"$ref": "#/x/\u0041"}],
		"s": "{\"$ref\": \"#/not/a/ref\"}", "discriminator": {"mapping": {"k": "K", "l": "#/components/schemas/L", "m": "other.json#/M"}},
		"mapping": {"n": "N"}, "c": {"$ref": 7}}`), func(r string) { got = append(got, r) })
	require.Equal(t, []string{"#/components/schemas/A", "#/x/A", "#/components/schemas/K", "#/components/schemas/L", "other.json#/M"}, got)
}

func TestRefKey(t *testing.T) {
	n := newNarrowing(nil)
	for ref, want := range map[string]compKey{
		"#/components/schemas/a~1b~0c":          {"components", "schemas", "a/b~c"},
		"#/components/responses/Not%20Found":    {"components", "responses", "Not Found"},
		"#/definitions/Pet/properties/owner":    {"", "definitions", "Pet"},
		"#/components/schemas/Pet/allOf/0/$ref": {"components", "schemas", "Pet"},
	} {
		got, ok := n.refKey(ref)
		require.True(t, ok, ref)
		require.Equal(t, want, got, ref)
	}
	for _, ref := range []string{"other.json#/components/schemas/A", "https://x.example/a.json", "#/components/schemas", "#/paths/~1a"} {
		_, ok := n.refKey(ref)
		require.False(t, ok, ref)
	}
	require.Equal(t, "#/components/schemas", n.bad, "the first reference it cannot follow")
}

// TestNarrowSlims: what is kept is kept without examples, external docs
// and the prose of schemas, which nothing reads; names that look like
// those keywords, values, parameters' and responses' descriptions and
// operations' summaries stay, and so do a Swagger 2.0 document's
// extensions.
func TestNarrowSlims(t *testing.T) {
	src, err := ReadBytes([]byte(`{"openapi": "3.0.3", "info": {"title": "T", "version": "1", "description": "kept"},
		"paths": {"/a": {"get": {"operationId": "a", "summary": "Get an a.", "externalDocs": {"url": "https://docs.example"},
			"parameters": [{"name": "q", "in": "query", "description": "the query", "example": "x", "schema": {"type": "string", "description": "prose", "example": "y"}}],
			"responses": {"200": {"description": "an a", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"},
				"examples": {"one": {"$ref": "#/components/examples/One"}}}}}}}}},
		"components": {"examples": {"One": {"value": {"$ref": "#/components/schemas/B"}}},
			"schemas": {"A": {"type": "object", "description": "An a.", "x-expandable": ["b"], "example": {"description": "x"},
				"properties": {"description": {"type": "string", "default": "example", "enum": ["example", "description"]},
					"example": {"$ref": "#/components/schemas/C", "description": "see C"}}},
				"B": {"type": "string"}, "C": {"type": "integer", "description": "A c."}}}}`))
	require.NoError(t, err)
	out, err := src.Narrow([]string{"a"})
	require.NoError(t, err)
	require.JSONEq(t, `{"openapi": "3.0.3", "info": {"title": "T", "version": "1", "description": "kept"},
		"paths": {"/a": {"get": {"operationId": "a", "summary": "Get an a.",
			"parameters": [{"name": "q", "in": "query", "description": "the query", "schema": {"type": "string"}}],
			"responses": {"200": {"description": "an a", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}}}}},
		"components": {"schemas": {"A": {"type": "object",
			"properties": {"description": {"type": "string", "default": "example", "enum": ["example", "description"]},
				"example": {"$ref": "#/components/schemas/C"}}},
			"C": {"type": "integer"}}}}`, string(out))

	src, err = ReadBytes([]byte(`{"swagger": "2.0", "info": {"title": "T", "version": "1"},
		"paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"description": "an a", "schema": {"$ref": "#/definitions/A"}, "examples": {"application/json": {}}}}}}},
		"definitions": {"A": {"type": "object", "x-nullable": true, "description": "An a."}}}`))
	require.NoError(t, err)
	out, err = src.Narrow([]string{"a"})
	require.NoError(t, err)
	require.Contains(t, string(out), `"definitions":{"A":{"type":"object","x-nullable":true}}`)
	require.NotContains(t, string(out), `"examples"`)
}
