// Package strictschema makes a tool's JSON Schema one a provider's strict
// mode takes, and gives the tool back the arguments a model wrote under
// it.
//
// With strict: true a provider constrains the model's decoding to the
// tool's schema, so that its arguments always parse and match. Strict mode
// takes a subset of JSON Schema, which differs by provider (Dialect):
//
//   - OpenAI (function tools of chat completions and Responses, and the
//     OpenAI-compatible servers that honour strict): every object lists
//     all its properties as required and allows no others
//     (additionalProperties: false); an optional property is therefore
//     sent required and nullable (its type with "null", or anyOf with
//     {"type": "null"}). Keywords: type, properties, required,
//     additionalProperties, items, enum, const, anyOf, $ref, $defs,
//     definitions, title, description, pattern, format (date-time, time,
//     date, duration, email, hostname, ipv4, ipv6, uuid), minimum,
//     maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minItems,
//     maxItems; at most 10 levels of nesting, 5,000 properties and 1,000
//     values an enum.
//   - Anthropic (Claude's strict tool use): every object allows no other
//     properties; optional properties stay optional. Keywords as OpenAI's
//     and allOf, without numeric bounds, string lengths, maxItems, a
//     minItems other than 0 or 1, or recursion; enums of primitive values
//     only. A request carries at most 20 strict tools, 24 optional
//     properties and 16 properties with anyOf or a list of types across
//     them (AnthropicLimits).
//
// Make rewrites a schema into the dialect's subset where that keeps its
// meaning for the model: additionalProperties: false is added to objects
// that declare their properties; optional properties become nullable
// (OpenAI); oneOf becomes anyOf; keywords that only narrow a value the
// dialect does not take (minLength, maxLength, default, examples,
// uniqueItems, …) are taken out and said in the description instead, as
// the providers' own SDKs do — the tool still checks them, as it checks
// every call. What strict mode cannot say at all makes the schema
// non-strict, with the reason (Result.Reason): an object with no
// declared properties or that allows others (a free-form map), a value
// of any type, not, if/then/else, patternProperties, tuple items, and
// the like. A non-strict schema is sent as it was written, without
// strict; it is never an error.
//
// For says which dialect a model ("provider:model") takes, if any, and
// Schemas makes one request's tool schemas for it, within the dialect's
// limits on a request's strict tools together (Budget): what the model
// call sends (internal/llm.CompileTools) and what a catalog's apply
// reports of an agent's tools (internal/store) are the one computation.
//
// Restore undoes, on a call's arguments, what Make's nullable properties
// let a model write: a null for a property the tool's own schema made
// optional and does not let be null is the property left out, so that
// the tool gets its arguments as its schema says them, whoever is on the
// far side (an MCP server, an HTTP API, another team's activity).
//
// It imports nothing but the standard library: the catalog's apply, the
// model call and the tool call each use it.
package strictschema
