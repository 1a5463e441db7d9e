// Package pipeline runs execute_pipeline calls: short, ephemeral data
// pipelines a model writes as JSON and that run without changing any
// workflow. A pipeline is
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
// in which exactly one field holds an array of objects (an API envelope
// such as {"count": 2, "flights": [...]}): that array is the table and the
// envelope's other fields are dropped. The envelope is kept whole until a
// table step needs it, so jq_transform can still read its other fields.
// Any other document is refused with a hint to pick the array with
// jq_transform.
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
// # Limits
//
// Every step bounds its work: no step's output may have more than
// Limits.MaxRows rows or a JSON size over Limits.MaxBytes (fetched and
// loaded inputs included), jq_transform stops after Limits.JQTimeout, and
// every loop over rows honours ctx. Network policy, response size and
// request time are the caller's: its Env.Fetch enforces them. One limit is
// outside the engine's reach: a single jq builtin (string repetition, an
// assignment far past the end of an array) can allocate a large
// intermediate value before the timeout stops the query, so run
// jq_transform in a process with memory to spare or a GOMEMLIMIT.
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
