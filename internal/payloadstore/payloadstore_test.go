package payloadstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/devstack/devtest"
	"github.com/agentflow/agentflow/internal/objstore"
	"github.com/agentflow/agentflow/internal/payloadstore"
)

func TestMain(m *testing.M) { devtest.Main(m) }

// threshold is the tests' payload threshold.
const threshold = 4 << 10

// devtestTimeout bounds a read from a store that is down.
const devtestTimeout = 30 * time.Second

// open returns a driver on a bucket of the test's own, reached through
// a proxy the test can take down, and the store under it.
func open(t *testing.T) (*payloadstore.Driver, *objstore.Store, *devtest.Proxy) {
	t.Helper()
	cfg := devtest.ObjectStore(t)
	p := devtest.StartProxy(t, strings.TrimPrefix(cfg.Endpoint, "http://"))
	cfg.Endpoint, cfg.MinPayloadBytes = "http://"+p.Addr(), threshold
	objects, err := objstore.New(t.Context(), cfg)
	require.NoError(t, err)
	require.NoError(t, objects.Check(t.Context()))
	return payloadstore.New(objects), objects, p
}

// codecServer serves the SDK's /encode and /decode over the driver: the
// SDK's own external storage, the path clients and workers take.
func codecServer(t *testing.T, d *payloadstore.Driver) func(op string, in []*commonpb.Payload) ([]*commonpb.Payload, error) {
	t.Helper()
	h, err := converter.NewPayloadHTTPHandler(converter.PayloadHTTPHandlerOptions{ExternalStorage: d.ExternalStorage()})
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return func(op string, in []*commonpb.Payload) ([]*commonpb.Payload, error) {
		body, err := protojson.Marshal(&commonpb.Payloads{Payloads: in})
		require.NoError(t, err)
		res, err := http.Post(srv.URL+"/"+op, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer res.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(res.Body)
		if res.StatusCode != http.StatusOK {
			return nil, &httpError{res.StatusCode, out.String()}
		}
		var ps commonpb.Payloads
		require.NoError(t, protojson.Unmarshal(out.Bytes(), &ps))
		return ps.GetPayloads(), nil
	}
}

type httpError struct {
	code int
	body string
}

func (e *httpError) Error() string { return e.body }

func jsonPayload(t *testing.T, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	require.NoError(t, err)
	return p
}

func TestRoundTrip(t *testing.T) {
	d, objects, _ := open(t)
	call := codecServer(t, d)
	small := jsonPayload(t, map[string]string{"prompt": "hello"})
	large := jsonPayload(t, map[string]string{"prompt": strings.Repeat("large ", 2*threshold)})

	encoded, err := call("encode", []*commonpb.Payload{small, large})
	require.NoError(t, err)
	require.Len(t, encoded, 2)
	require.True(t, proto.Equal(small, encoded[0]), "a payload under the threshold stays as it is")
	require.False(t, payloadstore.IsReference(encoded[0]))

	// The large one is a reference that reads as JSON, naming its object.
	ref := encoded[1]
	require.True(t, payloadstore.IsReference(ref))
	require.Less(t, proto.Size(ref), 1024)
	serialized, err := proto.MarshalOptions{Deterministic: true}.Marshal(large)
	require.NoError(t, err)
	sum := sha256.Sum256(serialized)
	hexSum := hex.EncodeToString(sum[:])
	text := string(ref.GetData())
	for _, want := range []string{`"driverName":"agentflow-s3"`, `"sha256":"` + hexSum + `"`, `"encoding":"json/plain"`,
		`"uri":"s3://` + objects.Config().Bucket + `/payloads/sha256/` + hexSum + `"`} {
		require.Contains(t, text, want)
	}
	c, ok, err := payloadstore.ParseReference(ref)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, payloadstore.Claim{Key: payloadstore.Key(hexSum), Size: int64(len(serialized)), SHA256: hexSum, Encoding: "json/plain"}, c)
	info, err := objects.Stat(t.Context(), c.Key)
	require.NoError(t, err)
	require.Equal(t, objstore.Info{Size: int64(len(serialized)), ContentType: payloadstore.ContentType}, info)

	// Encoding again (a retried activity, a replay) names the same object.
	again, err := call("encode", []*commonpb.Payload{large})
	require.NoError(t, err)
	require.True(t, proto.Equal(ref, again[0]))

	// Decoding gives the payloads back, metadata and data.
	decoded, err := call("decode", encoded)
	require.NoError(t, err)
	require.Len(t, decoded, 2)
	require.True(t, proto.Equal(small, decoded[0]))
	require.True(t, proto.Equal(large, decoded[1]))

	// And so does the converter for payloads read outside the SDK.
	var got map[string]string
	require.NoError(t, payloadstore.Converter(d).FromPayload(ref, &got))
	require.Equal(t, strings.Repeat("large ", 2*threshold), got["prompt"])
	resolved, err := d.Resolve(t.Context(), ref)
	require.NoError(t, err)
	require.True(t, proto.Equal(large, resolved))
}

func TestPassThrough(t *testing.T) {
	// Payloads of the CLI, other SDKs and histories recorded without a
	// store are no references: untouched, even with no store at all.
	var none *payloadstore.Driver
	for _, p := range []*commonpb.Payload{
		jsonPayload(t, "text"),
		{Metadata: map[string][]byte{"encoding": []byte("binary/null")}},
		{Metadata: map[string][]byte{"encoding": []byte("json/protobuf"), "messageType": []byte("temporal.api.common.v1.Payloads")}, Data: []byte(`{}`)},
		{},
	} {
		_, ok, err := payloadstore.ParseReference(p)
		require.NoError(t, err)
		require.False(t, ok)
		got, err := none.Resolve(t.Context(), p)
		require.NoError(t, err)
		require.Same(t, p, got)
	}
	require.Equal(t, converter.GetDefaultDataConverter(), payloadstore.Converter(nil))

	// A reference with no store, or of another driver, is refused clearly.
	ref := reference(`{"driverName":"agentflow-s3","claimData":{"key":"payloads/sha256/` + strings.Repeat("a", 64) +
		`","sha256":"` + strings.Repeat("a", 64) + `","size":"10"}}`)
	_, err := none.Resolve(t.Context(), ref)
	require.ErrorContains(t, err, "AGENTFLOW_S3_")
	_, _, err = payloadstore.ParseReference(reference(`{"driverName":"aws.s3driver","claimData":{}}`))
	require.ErrorContains(t, err, `stored by driver "aws.s3driver"`)
}

func reference(data string) *commonpb.Payload {
	return &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/protobuf"),
		"messageType": []byte("temporal.api.sdk.v1.ExternalStorageReference")}, Data: []byte(data)}
}

func TestCorruptObject(t *testing.T) {
	d, objects, _ := open(t)
	call := codecServer(t, d)
	large := jsonPayload(t, strings.Repeat("x", 2*threshold))
	encoded, err := call("encode", []*commonpb.Payload{large})
	require.NoError(t, err)
	c, _, err := payloadstore.ParseReference(encoded[0])
	require.NoError(t, err)

	// Other bytes under the key: refused by their hash, never decoded.
	garbled := bytes.Repeat([]byte{'y'}, int(c.Size))
	require.NoError(t, objects.Put(t.Context(), c.Key, bytes.NewReader(garbled), c.Size, "", nil))
	_, err = d.Resolve(t.Context(), encoded[0])
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	require.ErrorContains(t, err, "hash to sha256")
	_, err = call("decode", encoded)
	require.ErrorContains(t, err, "hash to sha256")

	// Fewer bytes: refused by their size.
	require.NoError(t, objects.Put(t.Context(), c.Key, bytes.NewReader(garbled[:10]), 10, "", nil))
	_, err = d.Resolve(t.Context(), encoded[0])
	require.ErrorContains(t, err, "cut off after 10")

	// No object: says so, and where.
	require.NoError(t, objects.Delete(t.Context(), c.Key))
	_, err = d.Resolve(t.Context(), encoded[0])
	require.ErrorIs(t, err, objstore.ErrNotFound)
	require.ErrorContains(t, err, "s3://"+objects.Config().Bucket+"/"+c.Key)
}

func TestStoreDown(t *testing.T) {
	d, _, p := open(t)
	call := codecServer(t, d)
	large := jsonPayload(t, strings.Repeat("x", 2*threshold))
	encoded, err := call("encode", []*commonpb.Payload{large})
	require.NoError(t, err)

	p.Down()
	// Writing and reading fail with the store's unavailability, an error
	// (which the SDK turns into a failed workflow task or activity
	// attempt, both retried), never a payload or a nil.
	ctx, cancel := context.WithTimeout(t.Context(), devtestTimeout)
	defer cancel()
	_, err = d.Resolve(ctx, encoded[0])
	require.ErrorIs(t, err, objstore.ErrUnavailable)
	_, err = call("decode", encoded)
	require.ErrorContains(t, err, "unavailable")
	_, err = call("encode", []*commonpb.Payload{jsonPayload(t, strings.Repeat("z", 2*threshold))})
	require.ErrorContains(t, err, "keep a payload")

	// Back up, it reads again.
	p.Up(t)
	got, err := d.Resolve(t.Context(), encoded[0])
	require.NoError(t, err)
	require.True(t, proto.Equal(large, got))
}
