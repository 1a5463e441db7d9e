package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// UnmarshalJSON decodes a request without failing: a request whose JSON
// has the wrong shape (a number where a string belongs, an array instead
// of an object) decodes to an empty request that remembers why, and
// Validate reports it. Temporal decodes a workflow's input before any
// workflow code runs; failing there would fail the workflow with the
// SDK's wording and as retryable, where every other bad request fails
// with a non-retryable InvalidRequest that names the field.
func (r *TurnRequest) UnmarshalJSON(b []byte) error {
	type plain TurnRequest // no methods: no recursion
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		*r = TurnRequest{decodeErr: describeJSONError(err)}
		return nil
	}
	*r = TurnRequest(p)
	return nil
}

func describeJSONError(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return fmt.Sprintf("the request must be a JSON object, not %s", withArticle(typeErr.Value))
		}
		return fmt.Sprintf("field %s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), withArticle(typeErr.Value))
	}
	var syntaxErr *json.SyntaxError
	if errors.As(err, &syntaxErr) {
		return fmt.Sprintf("the request is not valid JSON (offset %d): %v", syntaxErr.Offset, err)
	}
	return err.Error()
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "a string"
	case "int", "int64", "int32", "float64":
		return "a number"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	}
	return "a " + goKind
}

func withArticle(noun string) string {
	if noun != "" && strings.ContainsRune("aeiou", rune(noun[0])) {
		return "an " + noun
	}
	return "a " + noun
}
