package openapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/crm"
)

// stylesDoc has a parameter of each location and style a call can fill.
const stylesDoc = `
openapi: 3.0.3
info: {title: Styles, version: "1"}
servers: [{url: "https://{region}.api.example/base", variables: {region: {default: eu}}}]
paths:
  /simple/{id}/{ids}/{obj}:
    get:
      operationId: simple
      parameters:
        - {name: id, in: path, required: true, schema: {type: string}}
        - {name: ids, in: path, required: true, schema: {type: array, items: {type: integer}}}
        - {name: obj, in: path, required: true, explode: true, schema: {type: object, properties: {a: {type: integer}, b: {type: string}}}}
      responses: {"200": {description: ok}}
  /label/{l}/{m}:
    get:
      operationId: labelMatrix
      parameters:
        - {name: l, in: path, required: true, style: label, explode: true, schema: {type: array, items: {type: string}}}
        - {name: m, in: path, required: true, style: matrix, schema: {type: array, items: {type: string}}}
      responses: {"200": {description: ok}}
  /query:
    get:
      operationId: query
      parameters:
        - {name: tags, in: query, schema: {type: array, items: {type: string}}}
        - {name: csv, in: query, explode: false, schema: {type: array, items: {type: string}}}
        - {name: pipes, in: query, style: pipeDelimited, schema: {type: array, items: {type: string}}}
        - {name: filter, in: query, style: deepObject, explode: true, schema: {type: object, properties: {color: {type: string}, size: {type: integer}}}}
        - {name: flag, in: query, schema: {type: boolean}}
        - {name: where, in: query, content: {application/json: {schema: {type: object, properties: {x: {type: integer}}}}}}
        - {name: X-Trace, in: header, schema: {type: string}}
        - {name: session, in: cookie, schema: {type: string}}
      responses: {"200": {description: ok}}
  /twice/{id}:
    parameters:
      - {name: id, in: path, required: true, schema: {type: integer}}
    get:
      parameters:
        - {name: id, in: query, schema: {type: string}}
      responses: {"200": {description: ok}}
  /form:
    post:
      operationId: form
      requestBody:
        required: true
        content:
          application/x-www-form-urlencoded:
            schema: {type: object, required: [name], properties: {name: {type: string}, n: {type: integer}}}
      responses: {"204": {description: ok}}
  /upload:
    put:
      operationId: upload
      requestBody:
        content: {application/octet-stream: {schema: {type: string, format: binary}}}
      responses: {"204": {description: ok}}
`

func load(t *testing.T, src string) *Document {
	t.Helper()
	d, err := Load(context.Background(), []byte(src))
	require.NoError(t, err)
	return d
}

func TestLoad(t *testing.T) {
	for _, src := range [][]byte{crm.DocumentYAML(), crm.DocumentJSON()} {
		d := load(t, string(src))
		require.Equal(t, []string{"searchCustomers", "getCustomer", "listOrders", "createOrder", "cancelOrder"}, d.IDs())
		require.Equal(t, "CRM", d.Title())
		op, ok := d.Operation("getCustomer")
		require.True(t, ok)
		require.Equal(t, []string{"customerId", "expand"}, op.Keys, "the path item's parameters come first")
		require.True(t, op.Safe())
		op, _ = d.Operation("createOrder")
		require.False(t, op.Safe())
		require.NotNil(t, op.Body)
	}

	// An operation without an id is named by its method and path; two
	// parameters of one name are told apart by their location.
	d := load(t, stylesDoc)
	op, ok := d.Operation("GET /twice/{id}")
	require.True(t, ok)
	require.Equal(t, []string{"path:id", "query:id"}, op.Keys)

	for _, tt := range []struct{ name, src, want string }{
		{"swagger 1.2", `{"swagger": "1.2", "info": {"title": "x", "version": "1"}, "paths": {}}`, `swagger "1.2": want a Swagger 2.0 document`},
		{"swagger with an external ref", `{"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {"responses": {"200": {"description": "ok", "schema": {"$ref": "http://169.254.169.254/s.json"}}}}}}}`, "must be self-contained"},
		{"external ref", `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"$ref": "http://169.254.169.254/paths.json"}}}`, "must be self-contained"},
		{"external file", `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {"responses": {"200": {"$ref": "/etc/passwd"}}}}}}`, "must be self-contained"},
		{"no info", `{"openapi": "3.0.3", "paths": {}}`, "not valid"},
		{"version", `{"openapi": "4.0.0", "info": {"title": "x", "version": "1"}, "paths": {}}`, "want an OpenAPI 3 document"},
		{"not a document", `[1, 2]`, "load the OpenAPI document"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(context.Background(), []byte(tt.src))
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

func TestKeep(t *testing.T) {
	d := load(t, string(crm.DocumentYAML()))
	before, err := d.JSON()
	require.NoError(t, err)
	require.NoError(t, d.Keep([]string{"getCustomer", "listOrders"}))
	require.Equal(t, []string{"getCustomer", "listOrders"}, d.IDs())
	after, err := d.JSON()
	require.NoError(t, err)
	require.Less(t, len(after), len(before))
	require.NotContains(t, string(after), "createOrder")

	// What is kept loads again, as it is pinned.
	again := load(t, string(after))
	require.Equal(t, d.IDs(), again.IDs())

	err = d.Keep([]string{"getCustomer", "deleteEverything"})
	require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
	require.EqualError(t, err, `operations "deleteEverything": the document has no such operation; it has getCustomer, listOrders`)
}

func TestBaseURL(t *testing.T) {
	crmDoc := load(t, string(crm.DocumentYAML()))
	styles := load(t, stylesDoc)
	none := load(t, `{"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {"responses": {"200": {"description": "ok"}}}}}}`)
	from, _ := url.Parse("http://127.0.0.1:8080/specs/crm.json")
	for _, tt := range []struct {
		name   string
		doc    *Document
		server string
		from   *url.URL
		want   string
		err    string
	}{
		{"relative to the document's URL", crmDoc, "", from, "http://127.0.0.1:8080/v2", ""},
		{"the catalog's server", crmDoc, "https://crm.example/v3/", from, "https://crm.example/v3", ""},
		{"relative, inline", crmDoc, "", nil, "", `the document's server "/v2" is relative and the document was given inline: set server`},
		{"variables at their defaults", styles, "", nil, "https://eu.api.example/base", ""},
		{"no servers", none, "", from, "http://127.0.0.1:8080", ""},
		{"not http", crmDoc, "ftp://x/", nil, "", "want an http or https URL"},
		{"credentials", crmDoc, "https://u:p@x/", nil, "", "must not carry credentials"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.doc.BaseURL(tt.server, tt.from)
			if tt.err != "" {
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got.String())
		})
	}
}

func TestDecodeArgs(t *testing.T) {
	a, err := DecodeArgs([]byte(`{"operation_id": "x", "params": {"n": 12345678901234567890, "s": "a"}, "body": null}`))
	require.NoError(t, err)
	require.Equal(t, "x", a.OperationID)
	require.Equal(t, json.Number("12345678901234567890"), a.Params["n"], "numbers reach the API as written")
	require.True(t, a.HasBody)

	// A key given twice counts with its last value, as approval policies
	// (encoding/json) read it.
	a, err = DecodeArgs([]byte(`{"operation_id": "getCustomer", "operation_id": "cancelOrder"}`))
	require.NoError(t, err)
	require.Equal(t, "cancelOrder", a.OperationID)

	for _, tt := range []struct{ args, want string }{
		{`[]`, "must be a JSON object"},
		{`null`, "must be a JSON object"},
		{`{"operation_id": 7}`, "operation_id must be a string"},
		{`{"operation_id": "x", "params": [1]}`, "params must be an object of parameter values by name, not an array"},
		{`{"operation_id": "x", "method": "DELETE"}`, `unknown argument "method": the arguments are operation_id, params and body`},
	} {
		_, err := DecodeArgs([]byte(tt.args))
		require.True(t, agent.IsCode(err, agent.CodeInvalid), "%s: %v", tt.args, err)
		require.ErrorContains(t, err, tt.want, tt.args)
	}
}

func TestNewRequest(t *testing.T) {
	crmDoc := load(t, string(crm.DocumentYAML()))
	crmBase, _ := url.Parse("http://crm.test/v2")
	styles := load(t, stylesDoc)
	stylesBase, err := styles.BaseURL("", nil)
	require.NoError(t, err)

	type want struct {
		method, url string
		header      map[string]string
		body        string
	}
	for _, tt := range []struct {
		name string
		doc  *Document
		args string
		want want
		err  string
	}{
		{name: "path and query", doc: crmDoc, args: `{"operation_id": "getCustomer", "params": {"customerId": 7, "expand": ["orders"]}}`,
			want: want{method: "GET", url: "http://crm.test/v2/customers/7?expand=orders"}},
		{name: "a number as a string", doc: crmDoc, args: `{"operation_id": "getCustomer", "params": {"customerId": "7"}}`,
			want: want{method: "GET", url: "http://crm.test/v2/customers/7"}},
		{name: "defaults filled in", doc: crmDoc, args: `{"operation_id": "searchCustomers", "params": {"q": "ada lo"}}`,
			want: want{method: "GET", url: "http://crm.test/v2/customers?limit=10&q=ada+lo"}},
		{name: "a header", doc: crmDoc, args: `{"operation_id": "listOrders", "params": {"customerId": 3, "X-Request-Id": "r-1", "status": "open"}}`,
			want: want{method: "GET", url: "http://crm.test/v2/customers/3/orders?status=open", header: map[string]string{"X-Request-Id": "r-1"}}},
		{name: "a JSON body", doc: crmDoc, args: `{"operation_id": "createOrder", "body": {"customerId": 7, "items": [{"sku": "SKU-1", "qty": 2}]}}`,
			want: want{method: "POST", url: "http://crm.test/v2/orders", header: map[string]string{"Content-Type": "application/json"},
				body: `{"customerId":7,"items":[{"qty":2,"sku":"SKU-1"}]}`}},
		{name: "null params are left out", doc: crmDoc, args: `{"operation_id": "getCustomer", "params": {"customerId": 1, "expand": null}}`,
			want: want{method: "GET", url: "http://crm.test/v2/customers/1"}},

		{name: "simple path styles", doc: styles, args: `{"operation_id": "simple", "params": {"id": "a b/c", "ids": [1, 2], "obj": {"b": "x", "a": 3}}}`,
			want: want{method: "GET", url: stylesBase.String() + "/simple/a%20b%2Fc/1,2/a=3,b=x"}},
		{name: "label and matrix", doc: styles, args: `{"operation_id": "labelMatrix", "params": {"l": ["x", "y"], "m": ["p", "q"]}}`,
			want: want{method: "GET", url: stylesBase.String() + "/label/.x.y/;m=p,q"}},
		{name: "query styles, header and cookie", doc: styles,
			args: `{"operation_id": "query", "params": {"tags": ["a", "b"], "csv": ["c", "d"], "pipes": ["e", "f"], "filter": {"color": "red", "size": 2}, "flag": true, "where": {"x": 1}, "X-Trace": "t1", "session": "s1"}}`,
			want: want{method: "GET", url: stylesBase.String() + "/query?csv=c%2Cd&filter%5Bcolor%5D=red&filter%5Bsize%5D=2&flag=true&pipes=e%7Cf&tags=a&tags=b&where=%7B%22x%22%3A1%7D",
				header: map[string]string{"X-Trace": "t1", "Cookie": "session=s1"}}},
		{name: "names told apart by location", doc: styles, args: `{"operation_id": "GET /twice/{id}", "params": {"path:id": 5, "query:id": "q"}}`,
			want: want{method: "GET", url: stylesBase.String() + "/twice/5?id=q"}},
		{name: "a form", doc: styles, args: `{"operation_id": "form", "body": {"name": "ada", "n": 2}}`,
			want: want{method: "POST", url: stylesBase.String() + "/form", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, body: "n=2&name=ada"}},

		{name: "unknown operation", doc: crmDoc, args: `{"operation_id": "dropTables"}`,
			err: `unknown operation_id "dropTables"; the operations are searchCustomers, getCustomer, listOrders, createOrder, cancelOrder`},
		{name: "no operation", doc: crmDoc, args: `{}`, err: `operation_id is required; the operations are searchCustomers`},
		{name: "missing required parameter", doc: crmDoc, args: `{"operation_id": "searchCustomers", "params": {"tier": "pro"}}`,
			err: `searchCustomers: parameter "q" (query) is required`},
		{name: "missing path parameter", doc: crmDoc, args: `{"operation_id": "getCustomer"}`,
			err: `getCustomer: parameter "customerId" (path) is required`},
		{name: "wrong type", doc: crmDoc, args: `{"operation_id": "getCustomer", "params": {"customerId": "seven"}}`,
			err: `getCustomer: parameter "customerId" (path): an invalid integer`},
		{name: "out of range, two at once", doc: crmDoc, args: `{"operation_id": "searchCustomers", "params": {"q": "", "limit": 500}}`,
			err: `searchCustomers: parameter "q" (query): minimum string length is 1; parameter "limit" (query): number must be at most 50`},
		{name: "not in the enum", doc: crmDoc, args: `{"operation_id": "listOrders", "params": {"customerId": 1, "status": "lost"}}`,
			err: `listOrders: parameter "status" (query): value is not one of the allowed values`},
		{name: "unknown parameter", doc: crmDoc, args: `{"operation_id": "getCustomer", "params": {"id": 7}}`,
			err: `getCustomer: unknown parameter "id"; its parameters are customerId (path, required), expand (query)`},
		{name: "an object for a string", doc: crmDoc, args: `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": {"a": {"b": 1}}}}`,
			err: `listOrders: parameter "X-Request-Id" (header): property "a": want a string, number or boolean, not an object`},
		{name: "body required", doc: crmDoc, args: `{"operation_id": "createOrder"}`, err: `createOrder: body is required`},
		{name: "body against its schema", doc: crmDoc, args: `{"operation_id": "createOrder", "body": {"customerId": 7, "items": [{"sku": "A", "qty": 0}]}}`,
			err: `createOrder: body.items[0].qty: number must be at least 1`},
		{name: "body where none is taken", doc: crmDoc, args: `{"operation_id": "getCustomer", "params": {"customerId": 1}, "body": {"a": 1}}`,
			err: `getCustomer: the operation takes no body`},
		{name: "a path value that climbs", doc: styles, args: `{"operation_id": "simple", "params": {"id": "..", "ids": [1], "obj": {"a": 1}}}`,
			err: `simple: parameter "id" (path): ".." is not a value a path can carry`},
		{name: "a header value with a line break", doc: crmDoc, args: `{"operation_id": "listOrders", "params": {"customerId": 1, "X-Request-Id": "a\r\nX-Evil: 1"}}`,
			err: `listOrders: parameter "X-Request-Id" (header): a header value cannot hold line breaks or NUL`},
		{name: "a body that cannot be sent", doc: styles, args: `{"operation_id": "upload", "body": "AAAA"}`,
			err: `upload: the body's media type (application/octet-stream) cannot be sent`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args, err := DecodeArgs([]byte(tt.args))
			require.NoError(t, err)
			base := crmBase
			if tt.doc == styles {
				base = stylesBase
			}
			c, err := tt.doc.NewRequest(context.Background(), base, args)
			if tt.err != "" {
				require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			req := c.Request
			require.Equal(t, tt.want.method, req.Method)
			require.Equal(t, tt.want.url, req.URL.String())
			for k, v := range tt.want.header {
				require.Equal(t, v, req.Header.Get(k), k)
			}
			if tt.want.body != "" {
				got := readBody(t, req)
				if strings.HasPrefix(tt.want.body, "{") {
					require.JSONEq(t, tt.want.body, got)
				} else {
					require.Equal(t, tt.want.body, got)
				}
			} else {
				require.Empty(t, readBody(t, req))
			}
		})
	}
}

func readBody(t *testing.T, req *http.Request) string {
	t.Helper()
	if req.Body == nil {
		return ""
	}
	data, err := io.ReadAll(req.Body)
	require.NoError(t, err)
	return string(data)
}

func TestCheckResponse(t *testing.T) {
	d := load(t, string(crm.DocumentYAML()))
	base, _ := url.Parse("http://crm.test/v2")
	args, err := DecodeArgs([]byte(`{"operation_id": "getCustomer", "params": {"customerId": 13}}`))
	require.NoError(t, err)
	c, err := d.NewRequest(context.Background(), base, args)
	require.NoError(t, err)
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	for _, tt := range []struct {
		name   string
		status int
		header http.Header
		body   string
		want   string
	}{
		{"as documented", 200, jsonCT, `{"id": 13, "name": "x", "email": "e", "tier": "pro"}`, ""},
		{"a value outside an enum", 200, jsonCT, `{"id": 13, "name": "x", "email": "e", "tier": "legacy"}`,
			`response body.tier: value is not one of the allowed values ["free","pro","enterprise"]`},
		{"wrong types and missing fields", 200, jsonCT, `{"id": "13", "name": "x"}`,
			`response body.id: value must be an integer; response body.email: property "email" is missing; response body.tier: property "tier" is missing`},
		{"another media type", 200, http.Header{"Content-Type": {"text/html"}}, `<html></html>`,
			`response header Content-Type has unexpected value: "text/html"`},
		{"a status the document does not give", 202, jsonCT, `{}`, "the document gives no response with status 202 for getCustomer"},
		{"a documented error", 404, jsonCT, `{"error": "no customer 13"}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, c.CheckResponse(context.Background(), tt.status, tt.header, []byte(tt.body)))
		})
	}
}

func TestDescription(t *testing.T) {
	d := load(t, string(crm.DocumentYAML()))
	desc := d.Description("The CRM", func(op *Operation) bool { return !op.Safe() }, "Needs approval.")
	for _, want := range []string{
		`The CRM. Call one operation per call: {"operation_id": "...", "params": {"name": value}, "body": ...}.`,
		"\n- getCustomer: GET /customers/{customerId}. Get a customer by id. Params: customerId (path, integer, required); expand (query, array of string: orders): related records to include.",
		"\n- searchCustomers: GET /customers. Find customers whose name contains q. Params: q (query, string, required): part of the name; tier (query, string: free|pro|enterprise); limit (query, integer, default 10).",
		"\n- createOrder: POST /orders. Place an order for a customer. Body (application/json, required): object {customerId integer (required), items array of object {qty integer (required), sku string (required)} (required), note string}. Needs approval.",
		"\n- cancelOrder: DELETE /orders/{orderId}. Cancel an open order. Params: orderId (path, string, required). Needs approval.",
	} {
		require.Contains(t, desc, want)
	}
	require.NotContains(t, strings.SplitN(desc, "getCustomer:", 2)[1][:120], "Needs approval")

	var params struct {
		Required   []string `json:"required"`
		Properties struct {
			OperationID struct {
				Enum []string `json:"enum"`
			} `json:"operation_id"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(d.Parameters(), &params))
	require.Equal(t, []string{"operation_id"}, params.Required)
	require.Equal(t, d.IDs(), params.Properties.OperationID.Enum)

	// A document with many operations is described within MaxDescription;
	// the operations past it are named.
	var b strings.Builder
	b.WriteString(`{"openapi": "3.0.3", "info": {"title": "big", "version": "1"}, "paths": {`)
	for i := range 400 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"/r` + strconv.Itoa(i) + `": {"get": {"operationId": "op` + strconv.Itoa(i) + `", "summary": "` + strings.Repeat("words ", 20) + `", "responses": {"200": {"description": "ok"}}}}`)
	}
	b.WriteString(`}}`)
	big := load(t, b.String())
	desc = big.Description("", nil, "")
	require.LessOrEqual(t, len(desc), MaxDescription+400*8)
	require.Contains(t, desc, "more, called the same way: ")
	require.Contains(t, desc, "op399")
}

// swaggerPets is a Swagger 2.0 document of the shape public APIs still
// publish: a base path, definitions, a body parameter, an api key.
const swaggerPets = `
swagger: "2.0"
info: {title: Pets, version: "1.0"}
host: pets.example.com
basePath: /v2
schemes: [https]
consumes: [application/json]
produces: [application/json]
securityDefinitions:
  api_key: {type: apiKey, name: api_key, in: header}
paths:
  /pet/{petId}:
    get:
      operationId: getPetById
      parameters:
        - {name: petId, in: path, required: true, type: integer, format: int64}
      responses:
        "200": {description: a pet, schema: {$ref: "#/definitions/Pet"}}
      security: [{api_key: []}]
  /pet:
    post:
      operationId: addPet
      parameters:
        - {name: body, in: body, required: true, schema: {$ref: "#/definitions/Pet"}}
      responses:
        "200": {description: added}
definitions:
  Pet:
    type: object
    required: [name]
    properties:
      id: {type: integer, format: int64}
      name: {type: string}
`

// TestSwagger2: a Swagger 2.0 document, YAML or JSON, is converted to
// OpenAPI 3 at load: its operations, parameters, body and server are
// there, and it is pinned as OpenAPI 3.
func TestSwagger2(t *testing.T) {
	var v any
	require.NoError(t, yaml.Unmarshal([]byte(swaggerPets), &v))
	asJSON, err := json.Marshal(v)
	require.NoError(t, err)
	for name, src := range map[string]string{"yaml": swaggerPets, "json": string(asJSON)} {
		t.Run(name, func(t *testing.T) {
			d := load(t, src)
			require.Equal(t, []string{"addPet", "getPetById"}, d.IDs())
			get, ok := d.Operation("getPetById")
			require.True(t, ok)
			require.Equal(t, []string{"petId"}, get.Keys)
			post, ok := d.Operation("addPet")
			require.True(t, ok)
			require.NotNil(t, post.Body, "the body parameter is a request body")
			base, err := d.BaseURL("", nil)
			require.NoError(t, err)
			require.Equal(t, "https://pets.example.com/v2", base.String())
			pinned, err := d.JSON()
			require.NoError(t, err)
			require.Contains(t, string(pinned), `"openapi":"3.0.3"`)
			require.Contains(t, string(pinned), `#/components/schemas/Pet`)
		})
	}
}

// TestSwagger2Unconvertible: what of a Swagger 2.0 document does not
// convert to OpenAPI 3 is named — the operation, or the security
// definition — with what is wrong with it.
func TestSwagger2Unconvertible(t *testing.T) {
	tests := []struct {
		name, change, want string
	}{
		{"body and form parameters", `
  /pets/{petId}/photo:
    post:
      operationId: uploadPhoto
      consumes: [multipart/form-data]
      parameters:
        - {name: petId, in: path, required: true, type: integer}
        - {name: meta, in: body, schema: {type: object}}
        - {name: file, in: formData, type: file}
      responses: {"200": {description: ok}}
`, `POST /pets/{petId}/photo (uploadPhoto): body and form parameters cannot exist together for the same operation`},
		{"two bodies", `
  /pets/batch:
    put:
      parameters:
        - {name: one, in: body, schema: {type: object}}
        - {name: two, in: body, schema: {type: object}}
      responses: {"200": {description: ok}}
`, `PUT /pets/batch: multiple body parameters cannot exist for the same operation`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := strings.Replace(swaggerPets, "\npaths:\n", "\npaths:"+tt.change, 1)
			_, err := Load(context.Background(), []byte(src))
			require.True(t, agent.IsCode(err, agent.CodeInvalid), "%v", err)
			require.ErrorContains(t, err, "the Swagger 2.0 document does not convert to OpenAPI 3: "+tt.want)
		})
	}
	// A security definition of a flow OpenAPI 3 has no name for.
	src := strings.Replace(swaggerPets, "\nsecurityDefinitions:\n",
		"\nsecurityDefinitions:\n  legacy: {type: oauth2, flow: magic, authorizationUrl: 'https://pets.example.com/auth', scopes: {}}\n", 1)
	_, err := Load(context.Background(), []byte(src))
	require.ErrorContains(t, err, `securityDefinitions.legacy: unsupported flow "magic"`)
}
