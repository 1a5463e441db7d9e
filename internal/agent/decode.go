package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// UnmarshalJSON decodes a request strictly and without failing: a request
// whose JSON has the wrong shape (a number where a string belongs, an
// array instead of an object) or a field the protocol does not have (a
// misspelt "promt", a "sesion_id") decodes to an empty request that
// remembers why, and Validate reports it. Temporal decodes a workflow's
// input before any workflow code runs, with a converter that drops
// fields it does not know; failing there would fail the workflow with
// the SDK's wording and as retryable, and dropping them would run a turn
// the caller did not ask for (a prompt without its session), where every
// other bad request fails with a non-retryable InvalidRequest that names
// the field.
//
// The one exception is a request that says it speaks a later minor
// version than this build (version "1.1" to a "1.0" build): minor
// versions add optional fields, which this build cannot know, so it
// decodes such a request without them.
func (r *TurnRequest) UnmarshalJSON(b []byte) error {
	type plain TurnRequest // no methods: no recursion
	var p plain
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	// b is one JSON value: encoding/json checked it before calling.
	err := d.Decode(&p)
	if unknownField(err) {
		p = plain{}
		if json.Unmarshal(b, &p) == nil && laterMinor(p.Version) {
			err = nil
		}
	}
	if err != nil {
		*r = TurnRequest{decodeErr: describeJSONError(err)}
		return nil
	}
	*r = TurnRequest(p)
	return nil
}

// decodeStrict decodes the JSON value that raw begins with into v,
// refusing a field v does not have.
func decodeStrict(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// unknownFieldPrefix is how encoding/json's error for a field the
// target does not have begins: `json: unknown field "promt"`, naming
// the field but not the object it is in.
const unknownFieldPrefix = "json: unknown field "

func unknownField(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), unknownFieldPrefix)
}

// laterMinor reports whether version is a 1.x later than ProtocolVersion.
func laterMinor(version string) bool {
	major, minor, _ := strings.Cut(version, ".")
	ourMajor, ourMinor, _ := strings.Cut(ProtocolVersion, ".")
	n, err := strconv.Atoi(minor)
	ours, _ := strconv.Atoi(ourMinor)
	return major == ourMajor && err == nil && n > ours
}

func describeJSONError(err error) string {
	if field, ok := strings.CutPrefix(err.Error(), unknownFieldPrefix); ok {
		if near := nearestField(strings.Trim(field, `"`)); near != "" {
			return fmt.Sprintf("unknown field %s: the v1 job protocol has no such field (did you mean %q?)", field, near)
		}
		return fmt.Sprintf("unknown field %s: the v1 job protocol has no such field (check its spelling)", field)
	}
	if typeErr, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		if typeErr.Field == "" {
			return fmt.Sprintf("the request must be a JSON object, not %s", withArticle(typeErr.Value))
		}
		return fmt.Sprintf("field %s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type.Kind().String()), withArticle(typeErr.Value))
	}
	if syntaxErr, ok := errors.AsType[*json.SyntaxError](err); ok {
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

// nearestField is the request's field (or its context's) whose name is
// within two edits of name, for a misspelt one; "" when none is.
func nearestField(name string) string {
	best, bestDist := "", 3
	for _, t := range []reflect.Type{reflect.TypeFor[TurnRequest](), reflect.TypeFor[TurnContext]()} {
		for f := range t.Fields() {
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "" || tag == "-" {
				continue
			}
			if d := editDistance(strings.ToLower(name), tag); d < bestDist {
				best, bestDist = tag, d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
