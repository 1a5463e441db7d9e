// Package process checks and patches process definitions: a tenant's
// JSON documents of nodes and edges, named by tag (the workflow_tag of the
// job protocol), that describe what a process runs and in which order.
//
// It imports only the domain and internal/structured: it must not import
// the store or the tools, which call it.
//
//	{"nodes": [{"id": "fetch_flights", "type": "task", ...}, ...],
//	 "edges": [{"from": "fetch_flights", "to": "price_check", "condition": "..."}, ...]}
//
// # Rules
//
// Every definition satisfies BuiltinSchema — an object with nodes (each
// with a non-empty string id and type; other fields are free) and edges
// (each with from and to; other fields, such as condition, are free) —
// and two rules a schema cannot say: node ids are unique, and every edge
// joins two nodes that exist. A catalog may give a process a JSON Schema
// of its own (Compile), which the definition must satisfy as well, e.g. to
// allow only some node types or to require a config on email tasks. Such
// a schema may not refer to other documents: $ref only within itself.
//
// Check reports every problem at once, each at the JSON Pointer of the
// value it is about, so that the catalog loader can name the YAML line and
// a model can find what to change.
//
// # Patches
//
// A patch is the argument of the patch_workflow tool (seed 004 §5.2):
//
//	{"workflow_tag": "main",
//	 "patch_spec": {"operations": [RFC 6902 operations], "description": "why"}}
//
// DecodePatch checks it strictly: every operation is one of add, remove,
// replace, move, copy and test with the members that operation takes, and
// its paths are JSON Pointers into the definition (not the whole document).
// Apply runs the operations in order on a definition (with
// github.com/evanphx/json-patch/v5, RFC 6902 strictly: no negative array
// indices) and reports the first that cannot be applied by its index,
// with what is at the path instead: "operations[1] (add /edgez/-):
// /edgez does not exist; the definition has edges, nodes". Errors the
// model can act on carry agent.CodeInvalid.
package process
