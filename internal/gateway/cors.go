package gateway

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/words"
)

// ParseCORSOrigins reads AGENTFLOW_CORS_ORIGINS: comma-separated origins,
// each scheme://host[:port] with the scheme http or https and nothing
// after the host, exactly as a browser sends it in Origin (so the check is
// an exact match). There is no wildcard: an operator names each origin.
func ParseCORSOrigins(v string) ([]string, error) {
	var out []string
	for _, o := range words.ListEntries(v) {
		norm, err := CORSOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("AGENTFLOW_CORS_ORIGINS entry %q: %w", o, err)
		}
		out = append(out, norm)
	}
	return out, nil
}

// CORSOrigin checks an origin and returns it as browsers write it:
// scheme and host in lower case, no trailing slash.
func CORSOrigin(o string) (string, error) {
	if o == "*" || o == "null" {
		return "", fmt.Errorf("name each origin (scheme://host[:port]); %q would open the API to any page", o)
	}
	u, err := url.Parse(o)
	switch {
	case err != nil:
		return "", fmt.Errorf("want scheme://host[:port]: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("want an http:// or https:// origin")
	case u.Host == "" || u.Hostname() == "" || strings.Contains(u.Host, "*"):
		return "", fmt.Errorf("want scheme://host[:port], with a host")
	case u.User != nil || u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" || strings.HasSuffix(o, "?") || strings.HasSuffix(o, "#"):
		return "", fmt.Errorf("an origin is scheme://host[:port] and nothing more")
	}
	return strings.ToLower(u.Scheme + "://" + u.Host), nil
}

// CORS: what a page of an allowed origin may send. Authorization carries
// the token; there are no cookies, so credentials are never allowed.
var (
	corsMethods = []string{http.MethodGet, http.MethodPost}
	// content-disposition names a file a page uploads (POST /v1/files);
	// if-none-match revalidates a file it downloaded.
	corsHeaders = []string{"authorization", "content-disposition", "content-type", "if-none-match", "last-event-id", "traceparent", "tracestate"}
)

// corsMaxAge is how long, in seconds, a browser may keep a preflight's answer.
const corsMaxAge = "600"

type corsPolicy struct{ origins []string }

func newCORS(origins []string) (corsPolicy, error) {
	for _, o := range origins {
		if norm, err := CORSOrigin(o); err != nil || norm != o {
			return corsPolicy{}, fmt.Errorf("http api: CORS origin %q: want it as ParseCORSOrigins returns it", o)
		}
	}
	return corsPolicy{origins: slices.Clone(origins)}, nil
}

// wrap answers preflight requests and marks the answers to allowed
// origins. A request from another origin is served as any other (it has
// no cookie to ride on, and needs the token like any other) but without
// the header that would let the page read the answer.
func (c corsPolicy) wrap(next http.Handler, a *HTTPAPI) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		allowed := slices.Contains(c.origins, origin)
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method, Access-Control-Request-Headers")
			if err := c.preflight(origin, allowed, r); err != nil {
				a.Fail(w, r, err, 0)
				return
			}
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", strings.Join(corsMethods, ", "))
			h.Set("Access-Control-Allow-Headers", strings.Join(corsHeaders, ", "))
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if allowed {
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Expose-Headers", "WWW-Authenticate, ETag")
		}
		next.ServeHTTP(w, r)
	})
}

// preflight checks what a page asks to send.
func (c corsPolicy) preflight(origin string, allowed bool, r *http.Request) error {
	if !allowed {
		return agent.Errorf(agent.CodePermissionDenied, "origin %q may not call this API (AGENTFLOW_CORS_ORIGINS)", origin)
	}
	if m := r.Header.Get("Access-Control-Request-Method"); !slices.Contains(corsMethods, m) {
		return agent.Errorf(agent.CodePermissionDenied, "method %q is not one the API takes (%s)", m, strings.Join(corsMethods, ", "))
	}
	for _, line := range r.Header.Values("Access-Control-Request-Headers") {
		for _, name := range strings.Split(line, ",") {
			if name = strings.ToLower(strings.TrimSpace(name)); name != "" && !slices.Contains(corsHeaders, name) {
				return agent.Errorf(agent.CodePermissionDenied, "header %q is not one the API reads (%s)", name, strings.Join(corsHeaders, ", "))
			}
		}
	}
	return nil
}
