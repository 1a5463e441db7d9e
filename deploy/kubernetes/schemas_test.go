package kubernetes

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The Kubernetes API the manifests are checked against: the OpenAPI (v2)
// document of Kubernetes v1.27.0 that k8s.io/kube-openapi keeps for its
// own tests, at the version tools/k8s/go.mod pins (kustomize builds on that
// module, so building the tools downloads it). Checking against an older
// API than clusters run today keeps the manifests to fields every
// supported cluster knows.
const (
	openAPIModule  = "k8s.io/kube-openapi"
	openAPIFile    = "pkg/schemaconv/testdata/swagger.json"
	openAPIVersion = "v1.27.0"
)

// kubeAPI is the part of an OpenAPI v2 document the schemas are made from.
type kubeAPI struct {
	Info struct {
		Version string `json:"version"`
	} `json:"info"`
	Definitions map[string]map[string]any `json:"definitions"`
}

// loadKubeAPI reads the OpenAPI document from the module cache, where
// `go mod download` in tools/k8s puts it.
func loadKubeAPI(t *testing.T, root string) *kubeAPI {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", openAPIModule)
	cmd.Dir = filepath.Join(root, "tools", "k8s")
	out, err := cmd.Output()
	require.NoError(t, err, "go mod download %s in tools/k8s", openAPIModule)
	var mod struct{ Dir, Error string }
	require.NoError(t, json.Unmarshal(out, &mod))
	require.Empty(t, mod.Error)
	data, err := os.ReadFile(filepath.Join(mod.Dir, openAPIFile))
	require.NoError(t, err, "the Kubernetes OpenAPI document in %s", openAPIModule)
	var api kubeAPI
	require.NoError(t, json.Unmarshal(data, &api))
	require.Equal(t, openAPIVersion, api.Info.Version, "the pinned %s holds another Kubernetes API: update openAPIVersion and check the manifests still fit", openAPIModule)
	return &api
}

// writeSchemas writes into dir a strict JSON Schema (draft 4, which
// kubeconform assumes) for each kind of types ("apiVersion kind"), named as
// kubeconform's template {{ .ResourceKind }}{{ .KindSuffix }}.json looks
// for it. A kind the API does not have gets no file, and kubeconform
// reports it as a resource it has no schema for.
func (api *kubeAPI) writeSchemas(dir string, types []string) error {
	index := map[string]string{} // "group/version Kind" → definition
	for name, def := range api.Definitions {
		gvks, _ := def["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			group, _ := m["group"].(string)
			version, _ := m["version"].(string)
			kind, _ := m["kind"].(string)
			index[apiVersion(group, version)+" "+kind] = name
		}
	}
	for _, typ := range types {
		name, ok := index[typ]
		if !ok {
			continue
		}
		av, kind, _ := strings.Cut(typ, " ")
		doc := strict(api.Definitions[name]).(map[string]any)
		props := doc["properties"].(map[string]any)
		props["apiVersion"] = map[string]any{"type": "string", "enum": []any{av}}
		props["kind"] = map[string]any{"type": "string", "enum": []any{kind}}
		defs := map[string]any{}
		api.closure(name, defs)
		doc["definitions"] = defs
		doc["$schema"] = "http://json-schema.org/draft-04/schema#"
		data, err := json.Marshal(doc)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, schemaFile(av, kind)), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// closure adds the definitions name refers to, directly or not, to defs,
// made strict.
func (api *kubeAPI) closure(name string, defs map[string]any) {
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				dep := strings.TrimPrefix(ref, "#/definitions/")
				if _, seen := defs[dep]; !seen {
					defs[dep] = api.schema(dep)
					walk(api.Definitions[dep])
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(api.Definitions[name])
}

// schema is definition name made strict. Quantities ("500m", or 2 for two
// CPUs) are strings in the document, and YAML writes them either way.
func (api *kubeAPI) schema(name string) any {
	if name == quantity {
		return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}}
	}
	return strict(api.Definitions[name])
}

// strict copies an OpenAPI schema into the JSON Schema kubeconform checks
// with, as the API server reads objects: no property an object does not
// declare (unless it keeps unknown fields), and the two types that take
// either form (int-or-string) taking either. Descriptions are left out.
func strict(v any) any {
	switch v := v.(type) {
	case map[string]any:
		if v["format"] == "int-or-string" {
			return map[string]any{"oneOf": []any{map[string]any{"type": "string"}, map[string]any{"type": "integer"}}}
		}
		out := map[string]any{}
		for k, x := range v {
			if k == "description" {
				continue
			}
			out[k] = strict(x)
		}
		if props, ok := v["properties"].(map[string]any); ok && props != nil && v["additionalProperties"] == nil && v["x-kubernetes-preserve-unknown-fields"] != true {
			out["additionalProperties"] = false
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = strict(x)
		}
		return out
	}
	return v
}

// quantity is the definition of resource quantities.
const quantity = "io.k8s.apimachinery.pkg.api.resource.Quantity"

// apiVersion is group/version, or the version alone for the core group.
func apiVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// schemaFile is where kubeconform's {{ .ResourceKind }}{{ .KindSuffix }}
// looks: deployment-apps-v1.json, service-v1.json.
func schemaFile(apiVersion, kind string) string {
	group, version, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return fmt.Sprintf("%s-%s.json", strings.ToLower(kind), strings.ToLower(apiVersion))
	}
	group, _, _ = strings.Cut(group, ".")
	return fmt.Sprintf("%s-%s-%s.json", strings.ToLower(kind), strings.ToLower(group), strings.ToLower(version))
}

// schemaTemplate is kubeconform's -schema-location for the files of
// writeSchemas in dir.
func schemaTemplate(dir string) string {
	return filepath.Join(dir, "{{ .ResourceKind }}{{ .KindSuffix }}.json")
}
