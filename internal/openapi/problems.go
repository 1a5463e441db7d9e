package openapi

import (
	"cmp"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/agentflow/agentflow/internal/words"
)

// maxProblems bounds how many problems a message lists.
const maxProblems = 10

// problems writes what openapi3filter found, one problem per clause:
// `parameter "id" (path) is required; body.items[0].qty: number must be at
// least 1`. Values are left out: they may be long, or secret.
func problems(err error) string {
	var out []string
	collect(err, "", &out)
	if len(out) == 0 {
		return words.Clip(err.Error(), 300)
	}
	more := ""
	if len(out) > maxProblems {
		more = fmt.Sprintf("; and %d more", len(out)-maxProblems)
		out = out[:maxProblems]
	}
	return strings.Join(out, "; ") + more
}

func collect(err error, where string, out *[]string) {
	if me, ok := errors.AsType[openapi3.MultiError](err); ok && isMulti(err) {
		for _, e := range me {
			collect(e, where, out)
		}
		return
	}
	if re, ok := errors.AsType[*openapi3filter.RequestError](err); ok {
		switch {
		case re.Parameter != nil:
			where = fmt.Sprintf("parameter %q (%s)", re.Parameter.Name, re.Parameter.In)
		case re.RequestBody != nil:
			where = "body"
		}
		switch {
		case errors.Is(re.Err, openapi3filter.ErrInvalidRequired):
			*out = append(*out, where+" is required")
		case errors.Is(re.Err, openapi3filter.ErrInvalidEmptyValue):
			*out = append(*out, where+" must not be empty")
		case re.Err != nil:
			collect(re.Err, where, out)
		default:
			*out = append(*out, join(where, re.Reason))
		}
		return
	}
	if rs, ok := errors.AsType[*openapi3filter.ResponseError](err); ok {
		if rs.Err == nil {
			if strings.HasPrefix(rs.Reason, "response") {
				*out = append(*out, rs.Reason)
				return
			}
			*out = append(*out, join(cmp.Or(where, "response"), rs.Reason))
			return
		}
		if where == "" {
			where = "response body"
			if strings.Contains(rs.Reason, "header") {
				where = "response"
			}
		}
		var se *openapi3.SchemaError
		var pe *openapi3filter.ParseError
		if !errors.As(rs.Err, &se) && !errors.As(rs.Err, &pe) {
			*out = append(*out, join(where, rs.Reason+": "+rs.Err.Error()))
			return
		}
		collect(rs.Err, where, out)
		return
	}
	if se, ok := errors.AsType[*openapi3.SchemaError](err); ok {
		*out = append(*out, join(where+pointer(se.JSONPointer()), se.Reason))
		return
	}
	if pe, ok := errors.AsType[*openapi3filter.ParseError](err); ok {
		msg := pe.Reason
		if msg == "" && pe.Cause != nil {
			msg = pe.Cause.Error()
		}
		if path := pe.Path(); len(path) > 0 {
			var parts []string
			for _, p := range path {
				parts = append(parts, fmt.Sprint(p))
			}
			where += pointer(parts)
		}
		*out = append(*out, join(where, cmp.Or(msg, "cannot be read")))
		return
	}
	*out = append(*out, join(where, err.Error()))
}

// isMulti reports whether err itself (not something it wraps) is a
// MultiError.
func isMulti(err error) bool {
	_, ok := err.(openapi3.MultiError)
	return ok
}

// pointer writes a JSON pointer's tokens as .name and [index].
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		b.WriteString("." + t)
	}
	return b.String()
}

func join(where, msg string) string {
	if where == "" {
		return msg
	}
	return where + ": " + msg
}
