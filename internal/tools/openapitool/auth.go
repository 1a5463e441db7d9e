package openapitool

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"

	"github.com/agentflow/agentflow/internal/agent"
	"github.com/agentflow/agentflow/internal/egress"
	"github.com/agentflow/agentflow/internal/secrets"
	"github.com/agentflow/agentflow/internal/words"
)

// authCredential is a credential added to a call (seed 004 Appendix B).
// The secret is named by reference and resolved when a call is made.
type authCredential struct {
	Type   string `json:"type"`           // api_key | bearer | basic
	In     string `json:"in,omitempty"`   // api_key: header (default) | query | cookie
	Name   string `json:"name,omitempty"` // api_key: the header, parameter or cookie
	Secret string `json:"secret"`         // env:NAME
}

// authProfile is a named set of credentials a call may choose
// (auth_profile), for one API host: a document a call names cannot send
// them anywhere else.
type authProfile struct {
	Host string           `json:"host"`
	Auth []authCredential `json:"auth"`
}

var profileName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// checkAuthProfiles checks an entry's auth_profiles.
func checkAuthProfiles(profiles map[string]authProfile) error {
	for _, name := range slices.Sorted(maps.Keys(profiles)) {
		p := profiles[name]
		at := fmt.Sprintf("auth_profiles.%s", name)
		switch {
		case !profileName.MatchString(name):
			return configError("auth_profiles: %q: a profile's name is letters, digits, '_', '.' and '-', at most 64", words.Clip(name, 80))
		case len(p.Auth) == 0:
			return configError("%s.auth: give the profile's credentials", at)
		}
		if err := (egress.Credential{Host: p.Host, Name: "X", Secret: "env:X"}).Check(); err != nil {
			return configError("%s.host: %v", at, err)
		}
		if err := checkCredentials(at+".auth", p.Auth); err != nil {
			return configError("%v", err)
		}
	}
	return nil
}

// checkCredentials checks a list of credentials, at says where it is.
func checkCredentials(at string, list []authCredential) error {
	for i, a := range list {
		switch a.Type {
		case "api_key":
			switch {
			case a.Name == "":
				return fmt.Errorf("%s[%d]: an api_key needs the name of its header, query parameter or cookie", at, i)
			case a.In != "" && a.In != "header" && a.In != "query" && a.In != "cookie":
				return fmt.Errorf("%s[%d].in %q: want header, query or cookie", at, i, a.In)
			}
		case "bearer", "basic":
			if a.In != "" || a.Name != "" {
				return fmt.Errorf("%s[%d]: a %s credential goes in the Authorization header: leave out in and name", at, i, a.Type)
			}
		default:
			return fmt.Errorf("%s[%d].type %q: want api_key, bearer or basic", at, i, a.Type)
		}
		if err := secrets.ValidateRef(a.Secret); err != nil {
			return fmt.Errorf("%s[%d].secret: %w", at, i, err)
		}
		// The host comes from the document or the profile; the rest is
		// checked now.
		if err := a.credential("api.example").Check(); err != nil {
			return fmt.Errorf("%s[%d]: %w", at, i, err)
		}
	}
	return nil
}

// credential is a as the egress client adds it, to the requests to host.
func (a authCredential) credential(host string) egress.Credential {
	c := egress.Credential{Host: host, Secret: a.Secret}
	switch a.Type {
	case "bearer":
		c.In, c.Name, c.Prefix = egress.InHeader, "Authorization", "Bearer "
	case "basic":
		c.In = egress.InBasic
	default:
		c.In, c.Name = egress.Place(cmp.Or(a.In, "header")), a.Name
	}
	return c
}

// checkProfileHosts checks, for an entry with a pinned document, that
// each auth profile is for the API's host: credentials go to their own
// host only, so one for another host would be a profile that never works.
func checkProfileHosts(cfg openapiConfig, base *url.URL) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.AuthProfiles)) {
		p := cfg.AuthProfiles[name]
		if !p.carries(base) {
			return agent.Errorf(agent.CodeInvalid, "auth_profiles.%s.host %q: the API is at %s", name, p.Host, egress.HostPort(base))
		}
	}
	return nil
}

// credentials are the entry's auth, for the API's host and port, and the
// profile's, for its own host.
func (t *openapiTool) credentials(base *url.URL, profile *authProfile) (*egress.Credentials, error) {
	host := egress.HostPort(base)
	var list []egress.Credential
	for _, a := range t.cfg.Auth {
		list = append(list, a.credential(host))
	}
	if profile != nil {
		for _, a := range profile.Auth {
			list = append(list, a.credential(profile.Host))
		}
	}
	creds, err := egress.NewCredentials(t.deps.Secrets, list)
	if err != nil {
		return nil, agent.Errorf(agent.CodeInvalid, "openapi_action config: auth: %v", err)
	}
	return creds, nil
}

// carries reports whether the profile's credentials go with a request
// to u, by the egress client's rule.
func (p authProfile) carries(u *url.URL) bool {
	var list []egress.Credential
	for _, a := range p.Auth {
		list = append(list, a.credential(p.Host))
	}
	creds, err := egress.NewCredentials(nil, list)
	return err == nil && creds.Carries(u)
}
