package activities

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/tools"
	"github.com/agentflow/agentflow/internal/words"
)

// resolveParts makes a request's parts what a turn keeps: each image or
// file by a cas:// ref of the tenant's. A part sent by https URL is
// fetched once, here, through the tenant's egress policy (the same
// client and rules as its tools), checked, and stored as the tenant's
// blob, so that every model call of the turn — and every retry — sends
// the same bytes, and a URL the tenant may not reach is refused before
// the turn begins. A cas:// ref must be the tenant's. Media types are
// filled in from what is stored; an image part must hold an image models
// take.
func (a *Activities) resolveParts(ctx context.Context, tenantID string, parts []agent.Part) ([]agent.Part, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	var client *http.Client
	out := make([]agent.Part, len(parts))
	for i, p := range parts {
		at := fmt.Sprintf("parts[%d]", i)
		if p.Type == agent.PartText {
			out[i] = p
			continue
		}
		var mime string
		if strings.HasPrefix(p.URL, agent.CASRefPrefix) {
			info, err := a.store.TenantBlobInfo(ctx, tenantID, p.URL)
			mime = info.ContentType
			if agent.IsCode(err, agent.CodeNotFound) || agent.IsCode(err, agent.CodeInvalid) {
				return nil, agent.Errorf(agent.CodeInvalid, "%s: %s is not a file of tenant %q: upload it with POST /v1/files", at, p.URL, tenantID)
			}
			if err != nil {
				return nil, fmt.Errorf("%s: read %s: %w", at, p.URL, err)
			}
		} else {
			if client == nil {
				settings, err := a.tenants.Settings(ctx, tenantID)
				if err != nil {
					return nil, fmt.Errorf("load tenant %q: %w", tenantID, err)
				}
				client = settings.HTTP
			}
			data, got, err := fetchPart(ctx, client, p.URL, at)
			if err != nil {
				return nil, err
			}
			mime = got
			if p.MIMEType != "" {
				mime = p.MIMEType
			}
			if p.Type == agent.PartImage && !agent.IsImageType(mime) {
				return nil, agent.Errorf(agent.CodeInvalid, "%s: %s is %s, not an image type models take (%s)", at, words.Clip(p.URL, 100), mime, strings.Join(agent.ImageTypes, ", "))
			}
			ref, err := a.store.PutTenantBlob(ctx, tenantID, data, mime)
			if err != nil {
				return nil, fmt.Errorf("%s: store: %w", at, err)
			}
			p.URL = ref
		}
		p.MIMEType = cmp.Or(p.MIMEType, mime)
		if p.Type == agent.PartImage && !agent.IsImageType(p.MIMEType) {
			return nil, agent.Errorf(agent.CodeInvalid, "%s: %s is %s, not an image type models take (%s)", at, p.URL, p.MIMEType, strings.Join(agent.ImageTypes, ", "))
		}
		out[i] = p
	}
	return out, nil
}

// fetchPart gets a part's bytes by URL through the tenant's egress
// client, at most tools.MaxFileBytes of them, and its media type (the
// response's, else sniffed).
func fetchPart(ctx context.Context, client *http.Client, url, at string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: url %q: %v", at, words.Clip(url, 100), err)
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, "", ctx.Err()
		}
		// The egress policy's refusals and unreachable hosts alike: the
		// request names a URL the turn cannot use.
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: fetch %s: %v", at, words.Clip(url, 100), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: fetch %s: HTTP %d", at, words.Clip(url, 100), resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, tools.MaxFileBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("%s: fetch %s: %w", at, words.Clip(url, 100), err)
	}
	if len(data) > tools.MaxFileBytes {
		return nil, "", agent.Errorf(agent.CodeInvalid, "%s: %s is larger than %d bytes", at, words.Clip(url, 100), tools.MaxFileBytes)
	}
	mime, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	mime = strings.TrimSpace(strings.ToLower(mime))
	if mime == "" || mime == "application/octet-stream" {
		mime, _, _ = strings.Cut(http.DetectContentType(data), ";")
	}
	return data, mime, nil
}

// unwrapURLError drops net/http's "Get \"url\":" prefix, which repeats
// what the message already says.
func unwrapURLError(err error) error {
	var ue *neturl.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
