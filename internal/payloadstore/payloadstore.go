package payloadstore

import (
	"bytes"
	"context"
	"crypto/md5" //nolint:gosec // Content-MD5 is what S3 checks a body against, not a signature
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/agentflow/agentflow/internal/objstore"
)

// DriverName names the driver in every reference it writes: a process
// reads a reference only with a driver of that name, so it never changes.
const DriverName = "agentflow-s3"

// driverType is the kind of driver, the same for every instance.
const driverType = "s3"

// Claim data: what a reference says of its object. key, size and sha256
// find and check it; uri and encoding are for people (the object's
// address in the bucket, and the payload's own encoding).
const (
	ClaimKey      = "key"
	ClaimSize     = "size"
	ClaimSHA256   = "sha256"
	ClaimURI      = "uri"
	ClaimEncoding = "encoding"
)

// ContentType is the objects' media type: a serialized
// temporal.api.common.v1.Payload.
const ContentType = "application/x-protobuf; messageType=temporal.api.common.v1.Payload"

// maxObjectBytes bounds the size a reference may name: a protobuf
// message is at most 2 GiB.
const maxObjectBytes = 2<<30 - 1

// resolveTimeout bounds a read of a reference by Converter, whose
// decoding has no context of its own.
const resolveTimeout = 2 * time.Minute

var referenceType = string((&sdkpb.ExternalStorageReference{}).ProtoReflect().Descriptor().FullName())

// Driver keeps payloads in an object store. It is safe for concurrent
// use.
type Driver struct {
	objects *objstore.Store
}

var _ converter.StorageDriver = (*Driver)(nil)

// New returns a driver over objects.
func New(objects *objstore.Store) *Driver { return &Driver{objects: objects} }

// ExternalStorage is the SDK setting (client.Options.ExternalStorage)
// that keeps payloads from the store's threshold
// (objstore.Config.PayloadThreshold) on in the store through d.
func (d *Driver) ExternalStorage() converter.ExternalStorage {
	return converter.ExternalStorage{
		Drivers:              []converter.StorageDriver{d},
		PayloadSizeThreshold: int(d.objects.Config().PayloadThreshold()),
	}
}

// Name is DriverName.
func (d *Driver) Name() string { return DriverName }

// Type is the kind of driver.
func (d *Driver) Type() string { return driverType }

// Store puts each payload in the store, under the SHA-256 of its
// serialized form, and returns its claim.
func (d *Driver) Store(ctx converter.StorageDriverStoreContext, payloads []*commonpb.Payload) ([]converter.StorageDriverClaim, error) {
	claims := make([]converter.StorageDriverClaim, len(payloads))
	for i, p := range payloads {
		// Deterministic, so that the same payload (its metadata is a map)
		// is the same object whoever writes it.
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
		if err != nil {
			return nil, fmt.Errorf("serialize a payload: %w", err)
		}
		sum := sha256.Sum256(b)
		md := md5.Sum(b) //nolint:gosec // see the import
		c := Claim{Key: Key(hex.EncodeToString(sum[:])), Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:]),
			Encoding: string(p.GetMetadata()[converter.MetadataEncoding])}
		err = ctx.GetLimiter().Permit(ctx.Context, p, func() error {
			return d.objects.Put(ctx.Context, c.Key, bytes.NewReader(b), c.Size, ContentType, md[:])
		})
		if err != nil {
			return nil, fmt.Errorf("keep a payload of %d bytes in the object store: %w", len(b), err)
		}
		claims[i] = converter.StorageDriverClaim{ClaimData: c.data(d.uri(c.Key))}
	}
	return claims, nil
}

// Retrieve reads each claim's payload from the store, checking its size
// and SHA-256.
func (d *Driver) Retrieve(ctx converter.StorageDriverRetrieveContext, claims []converter.StorageDriverClaim) ([]*commonpb.Payload, error) {
	payloads := make([]*commonpb.Payload, len(claims))
	for i, claim := range claims {
		c, err := ParseClaim(claim.ClaimData)
		if err != nil {
			return nil, err
		}
		err = ctx.GetLimiter().Permit(ctx.Context, claim, func() error {
			p, err := d.read(ctx.Context, c)
			payloads[i] = p
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return payloads, nil
}

// read fetches and checks the payload c names.
func (d *Driver) read(ctx context.Context, c Claim) (*commonpb.Payload, error) {
	r, err := d.objects.Get(ctx, c.Key, 0, objstore.Digest{Size: c.Size, SHA256: c.SHA256})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("read the payload at %s: it is not in the object store (deleted, or this process is on another bucket): %w",
			d.uri(c.Key), err)
	}
	if err != nil {
		return nil, fmt.Errorf("read the payload at %s: %w", d.uri(c.Key), err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read the payload at %s: %w", d.uri(c.Key), err)
	}
	var p commonpb.Payload
	if err := proto.Unmarshal(b, &p); err != nil {
		// Its SHA-256 is the reference's: the object was written so, by
		// a writer that is not this driver.
		return nil, fmt.Errorf("read the payload at %s: its bytes are no payload: %w", d.uri(c.Key), err)
	}
	return &p, nil
}

// uri is the object's address, for people.
func (d *Driver) uri(key string) string {
	cfg := d.objects.Config()
	return "s3://" + cfg.Bucket + "/" + cfg.Prefix + key
}

// Claim is what a reference names: the object and what its bytes must
// be.
type Claim struct {
	Key      string // Key(SHA256)
	Size     int64
	SHA256   string // lowercase hex
	Encoding string // the payload's encoding, for people
}

func (c Claim) data(uri string) map[string]string {
	return map[string]string{ClaimKey: c.Key, ClaimSize: strconv.FormatInt(c.Size, 10), ClaimSHA256: c.SHA256,
		ClaimURI: uri, ClaimEncoding: c.Encoding}
}

// Key is the object key of a payload whose serialized bytes have the
// given sha256: under payloads/, apart from the blobs' sha256/ keys, so
// that the retention sweep, which deletes blobs' objects, never touches a
// payload a history names, and an operator can give payloads/ a bucket
// lifecycle rule as long as the namespace's retention.
func Key(sum string) string { return "payloads/" + objstore.Key(sum) }

// ParseClaim reads a claim's data, refusing one that does not name a
// content-addressed object of a possible size: a reference is read from
// a history, which anyone who can start a workflow writes.
func ParseClaim(data map[string]string) (Claim, error) {
	c := Claim{Key: data[ClaimKey], SHA256: data[ClaimSHA256], Encoding: data[ClaimEncoding]}
	if len(c.SHA256) != sha256.Size*2 || !isLowerHex(c.SHA256) {
		return Claim{}, fmt.Errorf("payload reference: %s %q is no SHA-256 in lowercase hex", ClaimSHA256, c.SHA256)
	}
	if c.Key != Key(c.SHA256) {
		return Claim{}, fmt.Errorf("payload reference: %s %q is not the key of sha256 %s", ClaimKey, c.Key, c.SHA256)
	}
	n, err := strconv.ParseInt(data[ClaimSize], 10, 64)
	if err != nil || n < 1 || n > maxObjectBytes {
		return Claim{}, fmt.Errorf("payload reference: %s %q is no size from 1 to %d bytes", ClaimSize, data[ClaimSize], maxObjectBytes)
	}
	c.Size = n
	return c, nil
}

func isLowerHex(s string) bool {
	for i := range len(s) {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// IsReference reports whether p is an external-storage reference, of
// this driver or another: the SDK's own test.
func IsReference(p *commonpb.Payload) bool {
	return string(p.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingProtoJSON &&
		string(p.GetMetadata()[converter.MetadataMessageType]) == referenceType
}

// ParseReference reads a reference payload of this driver. It returns
// ok false for a payload that is no reference, and an error for a
// reference that is malformed or another driver's.
func ParseReference(p *commonpb.Payload) (c Claim, ok bool, err error) {
	if !IsReference(p) {
		return Claim{}, false, nil
	}
	var ref sdkpb.ExternalStorageReference
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(p.GetData(), &ref); err != nil {
		return Claim{}, true, fmt.Errorf("payload reference: %w", err)
	}
	if ref.GetDriverName() != DriverName {
		return Claim{}, true, fmt.Errorf("payload reference: stored by driver %q; this process has only %q", ref.GetDriverName(), DriverName)
	}
	c, err = ParseClaim(ref.GetClaimData())
	return c, true, err
}

// Resolve returns p, or the payload it stands for when p is a
// reference: for payloads read outside the SDK's paths, which resolve
// references themselves (a history read with GetWorkflowHistory). A nil
// driver (no store) refuses a reference.
func (d *Driver) Resolve(ctx context.Context, p *commonpb.Payload) (*commonpb.Payload, error) {
	c, ok, err := ParseReference(p)
	switch {
	case !ok:
		return p, nil
	case err != nil:
		return nil, err
	case d == nil:
		return nil, errors.New("the payload is kept in an object store, and this process has none: set AGENTFLOW_S3_*")
	}
	return d.read(ctx, c)
}

// Converter is the default data converter, which also reads references
// (Resolve): the one to decode payloads read outside the SDK's paths. A
// nil driver gives the default data converter. It is no converter for a
// client or worker, whose references the SDK resolves (ExternalStorage).
func Converter(d *Driver) converter.DataConverter {
	if d == nil {
		return converter.GetDefaultDataConverter()
	}
	return converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), resolver{d})
}

// resolver is a codec that only decodes: it reads references.
type resolver struct{ d *Driver }

func (r resolver) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return payloads, nil
}

func (r resolver) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		var err error
		if out[i], err = r.d.Resolve(ctx, p); err != nil {
			return nil, err
		}
	}
	return out, nil
}
