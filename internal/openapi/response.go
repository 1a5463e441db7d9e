package openapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3filter"
)

// CheckResponse compares a response of the call with the operation's
// responses in the document: its status, headers and body. It returns how
// they differ ("" when they agree): `response body.tier: value is not one
// of the allowed values ["free","pro","enterprise"]`. A body in a media
// type that cannot be read is not checked.
func (c *Call) CheckResponse(ctx context.Context, status int, header http.Header, body []byte) string {
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: c.input, Status: status, Header: header, Options: checkOptions(),
	}
	in.SetBodyBytes(body)
	err := openapi3filter.ValidateResponse(ctx, in)
	if err == nil {
		return ""
	}
	if pe, ok := errors.AsType[*openapi3filter.ParseError](err); ok && pe.Kind == openapi3filter.KindUnsupportedFormat {
		return ""
	}
	if re, ok := errors.AsType[*openapi3filter.ResponseError](err); ok && re.Err == nil && re.Reason == "status is not supported" {
		return fmt.Sprintf("the document gives no response with status %d for %s", status, c.Op.ID)
	}
	return problems(err)
}
