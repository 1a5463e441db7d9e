package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/agentflow/agentflow/internal/gateway/intake"
)

// What the HTTP API reads: a request's body as the JSON of its message
// (the protobuf JSON mapping, strictly), and its query parameters as
// fields of the message. What cannot be read is CodeInvalid, with what is
// wrong, and nothing is called.

// bodyMarshaler is the HTTP API's JSON: field names as in the .proto
// (snake_case, as every JSON of agentflow), every field present in
// answers, and requests read strictly (strictJSON).
func bodyMarshaler() runtime.Marshaler {
	return strictJSON{&runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// strictJSON reads a body as exactly one JSON value, whose fields are all
// the message's: an unknown field is a mistake the caller should hear of,
// not a setting silently dropped. An empty body is an empty message.
type strictJSON struct{ *runtime.JSONPb }

// Marshal implements runtime.Marshaler: the JSON, and a newline, which
// shells and line-oriented tools expect at the end of an answer.
func (m strictJSON) Marshal(v any) ([]byte, error) {
	data, err := m.JSONPb.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// NewDecoder implements runtime.Marshaler.
func (m strictJSON) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return fmt.Errorf("request body: %w", err)
		}
		return m.decode(data, v)
	})
}

func (m strictJSON) decode(data []byte, v any) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return io.EOF // the callers take it as an empty message
	}
	if err := OneJSONValue(data); err != nil {
		return err
	}
	if err := m.Unmarshal(data, v); err != nil {
		return fmt.Errorf("request body: %s", protoText(err))
	}
	return nil
}

// OneJSONValue checks that data is one JSON value and nothing after it.
func OneJSONValue(data []byte) error { return intake.OneJSONValue(data) }

// protoText is a protobuf error's text without its "proto:" prefix, which
// says nothing to an HTTP caller.
func protoText(err error) string {
	s := err.Error()
	for _, p := range []string{"proto: ", "proto:\u00a0"} {
		s = strings.TrimPrefix(s, p)
	}
	return s
}

// strictQuery reads query parameters as grpc-gateway does (a field's
// proto or JSON name, dotted paths into messages, map[key]), after
// refusing a parameter that names no field: grpc-gateway would ignore it,
// and a misspelt page_size would silently read the first page.
type strictQuery struct{}

// Parse implements runtime.QueryParameterParser.
func (strictQuery) Parse(msg proto.Message, values url.Values, filter *utilities.DoubleArray) error {
	for key := range values {
		if err := knownField(msg.ProtoReflect().Descriptor(), key); err != nil {
			return err
		}
	}
	return (&runtime.DefaultQueryParser{}).Parse(msg, values, filter)
}

// knownField checks that key names a field of md: a.b.c, or m[k] for a map.
func knownField(md protoreflect.MessageDescriptor, key string) error {
	path := key
	if i := strings.IndexByte(key, '['); i >= 0 && strings.HasSuffix(key, "]") {
		path = key[:i]
	}
	parts := strings.Split(path, ".")
	for i, name := range parts {
		fd := md.Fields().ByTextName(name)
		if fd == nil {
			fd = md.Fields().ByJSONName(name)
		}
		switch {
		case fd == nil:
			return fmt.Errorf("unknown query parameter %q", key)
		case i < len(parts)-1 && (fd.Message() == nil || fd.IsList() || fd.IsMap()):
			return fmt.Errorf("query parameter %q: %s is not a message", key, name)
		case i < len(parts)-1:
			md = fd.Message()
		}
	}
	return nil
}
