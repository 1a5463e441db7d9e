package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"
)

// deleteBatch is the most keys one DeleteObjects request takes (S3's
// limit).
const deleteBatch = 1000

// oneByOne is how many single deletes run at once where a store has no
// multi-object delete.
const oneByOne = 8

// DeleteMany removes the objects under keys; missing ones are no error.
// It sends S3's multi-object delete, a thousand keys a request; a store
// without it (GCS's XML API answers 501) gets one delete per object.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	for start := 0; start < len(keys); start += deleteBatch {
		batch := keys[start:min(start+deleteBatch, len(keys))]
		err := s.deleteObjects(ctx, batch)
		if errors.Is(err, errNoMultiDelete) {
			return s.deleteEach(ctx, keys[start:])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// errNoMultiDelete: the store does not implement DeleteObjects.
var errNoMultiDelete = errors.New("no multi-object delete")

func (s *Store) deleteObjects(ctx context.Context, keys []string) error {
	ids := make([]types.ObjectIdentifier, len(keys))
	for i, k := range keys {
		ids[i] = types.ObjectIdentifier{Key: aws.String(s.cfg.Prefix + k)}
	}
	out, err := s.client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
		Bucket: aws.String(s.cfg.Bucket),
		Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
	})
	if err != nil {
		if re, ok := errors.AsType[*awshttp.ResponseError](err); ok && (re.HTTPStatusCode() == http.StatusNotImplemented || re.HTTPStatusCode() == http.StatusMethodNotAllowed) {
			return errNoMultiDelete
		}
		return s.failed("delete", fmt.Sprintf("%d objects", len(keys)), err)
	}
	// Quiet: only the keys that failed are listed.
	for _, e := range out.Errors {
		if aws.ToString(e.Code) == "NoSuchKey" {
			continue
		}
		return s.failed("delete", aws.ToString(e.Key), fmt.Errorf("%s: %s", aws.ToString(e.Code), aws.ToString(e.Message)))
	}
	return nil
}

func (s *Store) deleteEach(ctx context.Context, keys []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(oneByOne)
	for _, key := range keys {
		g.Go(func() error { return s.Delete(gctx, key) })
	}
	return g.Wait()
}
