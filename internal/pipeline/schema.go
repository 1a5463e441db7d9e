package pipeline

// Parameters is the JSON Schema of an execute_pipeline call's arguments,
// the one the tool shows the model. Each step is checked by the schema of
// its kind: only the fields that kind takes, with additionalProperties
// false throughout. Decode checks more than a schema can say (regular
// expressions, jq queries, date formats, where a step may stand); the
// tests check that whatever Decode accepts the schema accepts too.
const Parameters = `{
  "type": "object",
  "description": "Run a short data pipeline: fetch or load data, then transform it step by step. Each step takes the output of the one before; the first step is http_request unless input_ref gives the input. A table is an array of objects (rows); steps that need one also accept an object with exactly one array of objects in it (an API envelope). Errors name steps by their index in pipeline, from 0.",
  "required": ["session_id", "pipeline"],
  "additionalProperties": false,
  "properties": {
    "session_id": {"type": "string", "description": "Session ID for context tracking."},
    "input_ref": {"type": "string", "minLength": 1, "description": "Optional reference to stored data (an earlier result) to use as the input of step 0: its ref, or previous_results[i] for the i-th (from 0) of the results this turn was given. A pipeline with input_ref does not start with http_request."},
    "pipeline": {
      "type": "array",
      "description": "Steps, run in order.",
      "minItems": 1,
      "maxItems": 32,
      "items": {
        "anyOf": [
          {
            "type": "object",
            "description": "Fetch JSON or CSV (CSV when the response says text/csv or the URL ends in .csv), or download a file, or send one. Only as step 0.",
            "required": ["step", "url"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["http_request"]},
              "url": {"type": "string", "description": "Absolute http:// or https:// URL."},
              "method": {"type": "string", "enum": ["GET", "POST"], "description": "Default GET."},
              "params": {"type": "object", "description": "GET, or POST with body_ref: query parameters (strings, numbers, booleans or arrays of them). Other POST: the JSON body."},
              "response_as": {"type": "string", "enum": ["data", "file"], "description": "data (default): read the response as JSON or CSV. file: keep it as a file (an image, a PDF, an archive; up to 1 GiB), stored as it arrives; the step's output is {\"ref\", \"content_type\", \"size\", \"name\"} and the file goes with the answer."},
              "body_ref": {"type": "string", "minLength": 1, "description": "With method POST: send the stored file this ref names (cas://…, or previous_results[i]) as the request's body, with its content type; params then go in the query string."}
            }
          },
          {
            "type": "object",
            "description": "Sort rows by a field (stable). Numbers sort as numbers, text as text; null and missing values come last.",
            "required": ["step", "field"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["table_sort"]},
              "field": {"type": "string", "minLength": 1, "description": "Field to sort by; a.b reaches into nested objects."},
              "order": {"type": "string", "enum": ["asc", "desc"], "description": "Default asc."}
            }
          },
          {
            "type": "object",
            "description": "Keep the rows that meet a condition.",
            "required": ["step", "condition"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["table_filter"]},
              "condition": {
                "type": "object",
                "required": ["field", "op", "value"],
                "additionalProperties": false,
                "properties": {
                  "field": {"type": "string", "minLength": 1},
                  "op": {"type": "string", "enum": ["=", "!=", "<", "<=", ">", ">=", "in", "contains"], "description": "Numbers compare as numbers (a numeric string such as \"12.5\" too), text as text. in: value is an array. contains: substring of a text field, or element of an array field. = null matches missing values."},
                  "value": {"type": ["string", "number", "boolean", "null", "array"], "items": {"type": ["string", "number", "boolean", "null"]}}
                }
              }
            }
          },
          {
            "type": "object",
            "description": "Keep only these fields of each row, in this order.",
            "required": ["step", "fields"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["table_select"]},
              "fields": {"type": "array", "minItems": 1, "uniqueItems": true, "items": {"type": "string", "minLength": 1}}
            }
          },
          {
            "type": "object",
            "description": "Keep the first k rows (sort first for the top k).",
            "required": ["step", "k"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["top_k"]},
              "k": {"type": "integer", "minimum": 1}
            }
          },
          {
            "type": "object",
            "description": "Group rows by fields and aggregate: one row per group with the by fields and the aggregate, named count (or count_<field>) or <agg>_<field>, e.g. sum_revenue. Without by, one row for the whole table.",
            "required": ["step", "agg"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["groupby"]},
              "by": {"type": "array", "uniqueItems": true, "items": {"type": "string", "minLength": 1}},
              "agg": {"type": "string", "enum": ["count", "sum", "avg", "min", "max"]},
              "field": {"type": "string", "minLength": 1, "description": "Field to aggregate; required except for count (with it, count counts non-null values)."}
            }
          },
          {
            "type": "object",
            "description": "Join the input table (or left) with the right table on a field both have. A right field whose name the left row has already is named <name>_right.",
            "required": ["step", "right", "on"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["join"]},
              "left": {"type": "string", "minLength": 1, "description": "Ref of the left table (or previous_results[i]); only in a step without input (step 0 without input_ref)."},
              "right": {"type": "string", "minLength": 1, "description": "Ref of the right table (or previous_results[i])."},
              "on": {"type": "string", "minLength": 1},
              "how": {"type": "string", "enum": ["inner", "left"], "description": "Default inner; left keeps unmatched left rows."}
            }
          },
          {
            "type": "object",
            "description": "Transform the input with a jq query (a table is an array of objects). Several outputs become an array, one output is itself: wrap a stream in [ ] to always get an array, e.g. [.items[] | select(.price < 100)].",
            "required": ["step", "query"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["jq_transform"]},
              "query": {"type": "string", "minLength": 1}
            }
          },
          {
            "type": "object",
            "description": "Extract parts of a text field with a Go (RE2) regular expression, first match per row: named groups (?P<name>...) become fields of that name, unnamed groups <field>_1, <field>_2, ...; without groups the match is <field>_match. Rows that do not match get null.",
            "required": ["step", "field", "pattern"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["regex_extract"]},
              "field": {"type": "string", "minLength": 1},
              "pattern": {"type": "string", "minLength": 1}
            }
          },
          {
            "type": "object",
            "description": "Parse a date field with a strftime format (%Y-%m-%d %H:%M:%S, %d/%m/%Y, %s, %z ...) into an RFC 3339 string, UTC unless the format has a zone.",
            "required": ["step", "field", "format"],
            "additionalProperties": false,
            "properties": {
              "step": {"type": "string", "enum": ["parse_date"]},
              "field": {"type": "string", "minLength": 1},
              "format": {"type": "string", "minLength": 1}
            }
          }
        ]
      }
    }
  }
}`
