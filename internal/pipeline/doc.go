// Package pipeline runs execute_pipeline calls: short, ephemeral data
// pipelines a model writes as JSON and that run without changing any
// workflow. A pipeline is
//
// It imports only the domain and internal/jqproc: it must not import the
// tools, the egress client or the store; the execute_pipeline kind
// (internal/tools) calls it.
//
//	{"session_id": "...", "pipeline": [step, ...], "input_ref": "..."}
//
// Parameters is its JSON Schema, the one the tool shows the model. Decode
// checks a call strictly and Run executes it; both return errors written
// for the model, each naming the step by its index in the pipeline array
// (from 0), the step kind and what to change, e.g.
//
//	step 2 (table_filter): condition.op "like": want one of = != < <= > >= in contains
//
// Errors the model can fix carry agent.CodeInvalid; errors of the Env
// functions pass through with whatever code the caller gave them, wrapped
// in a *StepError that names the step.
//
// # Values
//
// The value flowing between steps is a Value: a table (rows, each a JSON
// object) or a JSON document. Parse reads a response or a stored blob:
// CSV when the content type is text/csv (or application/csv), or when the
// content type is neither JSON nor CSV and the URL's path ends in .csv;
// otherwise JSON, where a body of several JSON values in a row
// (newline-delimited JSON) is read as an array of them. A JSON array whose
// elements are all objects (or an empty array) is a table; anything else is
// a document.
//
// Steps that need a table accept a table, or a document that is an object
// in which exactly one field holds a non-empty array of objects (an API
// envelope such as {"count": 2, "flights": [...]}; when no field does, one
// that holds an empty array will do): that array is the table and the
// envelope's other fields are dropped. The envelope is kept whole until a
// table step needs it, so jq_transform can still read its other fields.
// Any other document is refused with a hint to reshape it with
// jq_transform.
//
// http_request reports a response other than 2xx as an error with the
// start of its body: agent.CodeInvalid for 4xx (the model asked for
// something wrong), agent.CodeUnavailable for 5xx, 408 and 429 (a retry
// may pass).
//
// CSV: the first record is the header (empty names become column_N,
// repeated ones name_2, name_3, ...); an empty cell is null; a column whose
// non-empty cells are all JSON number literals (12, -3.5, 1e3; not 007 or
// +1) holds numbers, any other column holds strings, so zip codes and ids
// with leading zeros stay strings.
//
// # Fields, numbers and order
//
// A field names a row's field; when no field has that exact name and the
// name has dots, it reaches into nested objects (price.amount). Values are
// compared by type: numbers as numbers, strings as strings, and a string
// that is a JSON number literal ("12.50") counts as a number when the other
// side is a number or such a string too. table_sort orders numbers (and
// numeric strings) first, then other strings, then booleans, then objects
// and arrays, and puts null and missing values last in both directions; it
// is stable. groupby groups in the order groups first appear.
//
// # Steps
//
//   - http_request: only as step 0 and without input_ref. GET sends params
//     as the query string (arrays as repeated keys, replacing the URL's own
//     values of those keys); POST sends them as a JSON body. The request
//     goes to Env.Fetch, which may add headers such as auth. Files go
//     both ways without passing through the engine: with response_as
//     "file" the response's body is kept as a file (Env.Fetch stores it
//     as it arrives) and the step's output is a document that names it,
//     {"ref", "content_type", "size", "name"}, and the run's Result.Files
//     list it; a POST with body_ref sends the stored file that ref names
//     as its body (Env.Fetch reads it as it sends it), and its params go
//     in the query string.
//   - table_sort: see above; order asc (default) or desc.
//   - table_filter: = and != compare as above (= null matches null and
//     missing values); < <= > >= compare numbers or strings, and rows whose
//     value cannot be compared with the condition's are dropped, counted in
//     a warning; in takes an array; contains finds text in a string (case
//     sensitive) or an element in an array. A field in no row is an error.
//   - table_select: the fields named, null where a row lacks one.
//   - top_k: the first k rows.
//   - groupby: one row per group of the by fields (none: one row for the
//     whole table) holding those fields and the aggregate, named count (or
//     count_<field>, which counts non-null values) or <agg>_<field>
//     (sum_revenue). Null and missing values are skipped; a value sum or
//     avg cannot add is an error naming its row. Integer sums are exact.
//   - join: the input table (or left, in a step without input) with right,
//     on a field: inner (default) or left. Keys compare as table_filter's
//     = does; a right field whose name the left row has is <name>_right;
//     several matches give several rows, in left then right order.
//   - jq_transform: gojq; a table is an array of objects to the query.
//     Outputs are collected: none gives an empty table, one gives that
//     value, several an array of them (wrap a stream in [ ] for an array
//     whatever the count). The query cannot read the environment or files.
//   - regex_extract: Go RE2, first match in each row's field (strings, or
//     numbers as text). Named groups become fields of that name, unnamed
//     ones <field>_1, <field>_2 (by group number), and a pattern without
//     groups writes <field>_match. Every row gets every output field, null
//     where the row does not match, so the table keeps one shape; when no
//     row matches a warning says so.
//   - parse_date: strftime format (github.com/itchyny/timefmt-go) to an RFC
//     3339 string, UTC unless the format reads a zone. Null, missing and
//     empty values are left alone. When no value parses the format is
//     wrong and the step fails naming the first row that did not; when
//     only some fail they are kept as they were and a warning counts them:
//     real data has the odd "n/a", and failing the whole call for it would
//     leave the model no way forward but to drop those rows blind.
//
// Result carries warnings like these for the model.
//
// # Limits
//
// Every step bounds its work: no step's output may have more than
// Limits.MaxRows rows or a JSON size over Limits.MaxBytes (fetched and
// loaded inputs included). Steps whose output can be many times their
// input — table_select and groupby of fields most rows lack (each becomes
// a null in every row), join (a left row repeats once per match),
// regex_extract (a field per group in every row) — measure it row by row
// as they build it and stop at MaxBytes, so that what they hold stays
// within a small multiple of it. jq_transform stops after Limits.JQTimeout and
// every other step but http_request after Limits.StepTimeout, and every
// loop over rows honours ctx. regex_extract refuses patterns that compile
// to more than 2000 instructions and reads the first 64 KiB of each
// value, so that one row's match stays short (Go's RE2 engine is linear
// in both). Network policy, response size and
// request time are the caller's: its Env.Fetch enforces them.
//
// jq_transform runs in a child process (internal/jqproc) under a memory
// budget the kernel enforces, 256 MiB by default: a query can build a
// large value in one builtin (a string doubled in a reduce, "x" * 1e9,
// recursion without end) before any size check or the timeout sees it,
// and what runs out of memory is then the child, not the worker. Such a
// query fails with a message that names the budget. At most a few
// queries run at once per process (4 by default); one that finds every
// slot taken waits within its step's time and then fails with
// agent.CodeUnavailable. Env.JQ sets both; by default one pool serves the
// process.
//
// # Refs
//
// A ref (input_ref, a join's left and right, a request's body_ref) is the
// caller's to read, so it may name data any way the caller reads: a
// cas:// or artifact:// ref, or an input of the turn by index,
// previous_results[i] (agent.ResolveInput). Decode checks only that a ref
// is a short string.
//
// # Caching
//
// Key hashes a pipeline's canonical JSON for a per-tenant result cache,
// which is the caller's choice and keeps its own TTL. A pipeline that
// starts with http_request reads a remote source whose answer changes over
// time, so its key is time-sensitive: cache such results briefly, if at
// all. Pipelines over input_ref and join refs read content-addressed data
// and may be cached for as long as those refs live.
package pipeline
