package openapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/crm"
)

// FuzzNewRequest feeds arbitrary arguments to the decoder and the request
// builder of two documents. Nothing panics; every refusal is
// agent.CodeInvalid; and a request that is built goes to the document's
// server, under its base path, with exactly the path segments of its
// operation: no value can add a segment, climb out of one or leave the
// host.
func FuzzNewRequest(f *testing.F) {
	for _, seed := range []string{
		`{"operation_id": "getCustomer", "params": {"customerId": 7, "expand": ["orders"]}}`,
		`{"operation_id": "searchCustomers", "params": {"q": "ada", "limit": 5, "tier": "pro"}}`,
		`{"operation_id": "listOrders", "params": {"customerId": 3, "X-Request-Id": "r-1"}}`,
		`{"operation_id": "createOrder", "body": {"customerId": 7, "items": [{"sku": "SKU-1", "qty": 2}], "note": "x"}}`,
		`{"operation_id": "cancelOrder", "params": {"orderId": "O-12"}}`,
		`{"operation_id": "simple", "params": {"id": "a/../b", "ids": [1, 2], "obj": {"a": 1, "b": "x"}}}`,
		`{"operation_id": "labelMatrix", "params": {"l": ["x", "."], "m": ["p;q", "r"]}}`,
		`{"operation_id": "query", "params": {"tags": ["a"], "filter": {"color": "red"}, "where": {"x": 1}, "session": "s", "X-Trace": "t"}}`,
		`{"operation_id": "GET /twice/{id}", "params": {"path:id": 5, "query:id": "q"}}`,
		`{"operation_id": "form", "body": {"name": "ada", "n": [1, 2]}}`,
		`{"operation_id": "simple", "params": {"id": "%2e%2e", "ids": [], "obj": {}}}`,
		`{"operation_id": "x", "operation_id": "y", "params": null, "body": null}`,
		`[`, `{}`, `{"params": {"": ""}}`,
		`{"openapi_url": "https://docs.example/o.json", "operation_id": "getCustomer", "auth_profile": "crm", "params": {"customerId": 1}}`,
		`{"openapi_url": 7, "auth_profile": {"bearer": "x"}}`,
	} {
		f.Add([]byte(seed))
	}
	ctx := context.Background()
	crmDoc, err := Load(ctx, crm.DocumentYAML())
	if err != nil {
		f.Fatal(err)
	}
	crmBase, _ := url.Parse("http://crm.test/v2")
	styles, err := Load(ctx, []byte(stylesDoc))
	if err != nil {
		f.Fatal(err)
	}
	stylesBase, err := styles.BaseURL("", nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// A tool whose calls name their document and credentials reads
		// the same arguments, and those two, as strings.
		if wide, err := DecodeArgs(raw, ArgOpenAPIURL, ArgAuthProfile); err != nil {
			if !agent.IsCode(err, agent.CodeInvalid) {
				t.Fatalf("DecodeArgs(%q, openapi_url, auth_profile): %v is not CodeInvalid", raw, err)
			}
		} else if narrow, err := DecodeArgs(raw); err == nil && (wide.OpenAPIURL != "" || wide.AuthProfile != "") {
			t.Fatalf("DecodeArgs(%q) took openapi_url or auth_profile: %+v", raw, narrow)
		}
		args, err := DecodeArgs(raw)
		if err != nil {
			if !agent.IsCode(err, agent.CodeInvalid) {
				t.Fatalf("DecodeArgs(%q): %v is not CodeInvalid", raw, err)
			}
			return
		}
		for _, d := range []struct {
			doc  *Document
			base *url.URL
		}{{crmDoc, crmBase}, {styles, stylesBase}} {
			c, err := d.doc.NewRequest(ctx, d.base, args)
			if err != nil {
				if !agent.IsCode(err, agent.CodeInvalid) {
					t.Fatalf("NewRequest(%q): %v is not CodeInvalid", raw, err)
				}
				continue
			}
			u := c.Request.URL
			if u.Scheme != d.base.Scheme || u.Host != d.base.Host {
				t.Fatalf("NewRequest(%q) goes to %s, not %s", raw, u, d.base)
			}
			// The URL as sent parses back to the same segments.
			sent, err := url.Parse(u.String())
			if err != nil {
				t.Fatalf("NewRequest(%q) built %q, which does not parse: %v", raw, u, err)
			}
			path := sent.EscapedPath()
			if !strings.HasPrefix(path, d.base.EscapedPath()+"/") {
				t.Fatalf("NewRequest(%q): path %q is not under %q", raw, path, d.base.EscapedPath())
			}
			got := strings.Split(strings.TrimPrefix(path, d.base.EscapedPath()), "/")
			want := strings.Split(c.Op.Path, "/")
			if len(got) != len(want) {
				t.Fatalf("NewRequest(%q): path %q has %d segments; %s has %d", raw, path, len(got), c.Op.Path, len(want))
			}
			for i, seg := range got {
				if seg == "." || seg == ".." || seg == "" && i > 0 {
					t.Fatalf("NewRequest(%q): path %q has segment %q", raw, path, seg)
				}
				if !strings.Contains(want[i], "{") && seg != want[i] {
					t.Fatalf("NewRequest(%q): path %q: segment %q, want %q", raw, path, seg, want[i])
				}
			}
			for k, vs := range c.Request.Header {
				for _, v := range vs {
					if strings.ContainsAny(k+v, "\r\n") {
						t.Fatalf("NewRequest(%q): header %q: %q", raw, k, v)
					}
				}
			}
		}
	})
}

// FuzzNarrow feeds arbitrary documents, JSON or YAML, to Read, Outline
// and Narrow. Nothing panics; every refusal is agent.CodeInvalid or a
// *TooLargeError; a narrowed document is one JSON object whose operations
// are those asked for, or all of them.
func FuzzNarrow(f *testing.F) {
	for _, seed := range []string{
		// Small seeds: the fuzzer minimizes every input it finds
		// interesting, and a large one takes it a long while.
		`{"openapi": "3.0.3", "security": [{"k": []}], "paths": {"/a/{id}": {"parameters": [{"$ref": "#/components/parameters/Id"}],
			"get": {"operationId": "getA", "responses": {"200": {"$ref": "#/components/responses/A"}}}, "post": {"requestBody": {"$ref": "#/components/requestBodies/B"}}}},
			"components": {"parameters": {"Id": {"name": "id", "in": "path"}}, "responses": {"A": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/A"}}}}},
			"requestBodies": {"B": {}}, "schemas": {"A": {"properties": {"b": {"$ref": "#/components/schemas/B"}}}, "B": {}}, "securitySchemes": {"k": {}}}}`,
		"openapi: 3.1\npaths:\n  /a:\n    get: {operationId: a, responses: {200: {$ref: '#/components/responses/R'}}}\ncomponents:\n  responses: {R: {description: r}}\n",
		`{"swagger": "2.0", "paths": {"/a": {"get": {"operationId": "a", "responses": {"200": {"schema": {"$ref": "#/definitions/A"}}}}}}, "definitions": {"A": {"$ref": "#/definitions/B"}, "B": {}}}`,
		`{"openapi": "3.0.3", "paths": {"/a": {"get": {"operationId": "a", "parameters": [{"$ref": "#/paths/~1b"}]}}}}`,
		`{"openapi": "3.0.3", "components": {"schemas": {"A": {"discriminator": {"mapping": {"x": "A"}}, "$ref": "#/components/schemas/A"}}}, "paths": {"/a": {"get": {"security": [{"k": []}], "responses": {"200": {"$ref": "#/components/schemas/A"}}}}}}`,
		"a: &a [x, x]\nb: [*a, *a]\n", "[1]", "{", `{"paths": []}`, `{"components": 1, "paths": {"/a": 2}}`, "\ufeff{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := Read(bytes.NewReader(data), 1<<20)
		if err != nil {
			var big *TooLargeError
			if !agent.IsCode(err, agent.CodeInvalid) && !errors.As(err, &big) {
				t.Fatalf("Read(%q): %v is neither CodeInvalid nor TooLargeError", data, err)
			}
			return
		}
		ops, err := src.Outline()
		if err != nil {
			if !agent.IsCode(err, agent.CodeInvalid) {
				t.Fatalf("Outline(%q): %v is not CodeInvalid", data, err)
			}
			return
		}
		var ids []string
		if len(ops) > 0 {
			ids = []string{ops[len(ops)/2].ID}
		}
		for _, want := range [][]string{nil, ids} {
			out, err := src.Narrow(want)
			if err != nil {
				if !agent.IsCode(err, agent.CodeInvalid) {
					t.Fatalf("Narrow(%q, %q): %v is not CodeInvalid", data, want, err)
				}
				continue
			}
			if !json.Valid(out) || out[0] != '{' {
				t.Fatalf("Narrow(%q, %q) = %q, not a JSON object", data, want, out)
			}
			again, err := ReadBytes(out)
			if err != nil {
				t.Fatalf("Narrow(%q, %q) = %q, which does not read back: %v", data, want, out, err)
			}
			kept, err := again.Outline()
			if err != nil {
				t.Fatalf("Narrow(%q, %q) = %q, whose outline fails: %v", data, want, out, err)
			}
			if want != nil && (len(kept) != 1 || kept[0].ID != want[0]) {
				t.Fatalf("Narrow(%q, %q) kept %v", data, want, kept)
			}
		}
	})
}
