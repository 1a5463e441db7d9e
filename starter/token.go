package main

import (
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/agentflow/agentflow/internal/gateway"
)

// tokenCmd makes a new bearer token: it prints the token, which is shown
// once, and the AGENTFLOW_TOKENS entry that names it by its hash, so the
// gateway's configuration never holds the token itself.
func tokenCmd(args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		return fmt.Errorf("usage: starter token new --tenant TENANT [--roles user,approver,admin] [--name NAME]")
	}
	fs := flag.NewFlagSet("token new", flag.ContinueOnError)
	tenant := fs.String("tenant", "", "the tenant the token acts for (required)")
	roles := fs.String("roles", string(gateway.RoleUser), "comma-separated roles: user (turns), approver (approvals), admin (catalog), or a role of your own that policies and routing rules read as caller.roles")
	name := fs.String("name", "", "who holds it; recorded as the approver of its decisions (default: token-<hash prefix>)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	var rs []gateway.Role
	for _, r := range strings.Split(*roles, ",") {
		if r = strings.TrimSpace(r); r != "" {
			rs = append(rs, gateway.Role(r))
		}
	}
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	secret := "af_" + base64.RawURLEncoding.EncodeToString(b[:])
	tok, err := gateway.NewToken(secret, *tenant, *name, rs...)
	if err != nil {
		return fmt.Errorf("token new: %w", err)
	}
	spec := tok.Tenant + ":" + strings.Join(roleNames(tok.Roles), "+") + ":" + tok.Name
	fmt.Fprintf(out, "token (shown once; give it to %s):\n  %s\n", tok.Name, secret)
	fmt.Fprintf(out, "AGENTFLOW_TOKENS entry (holds only its hash):\n  sha256:%s=%s\n", tok.Hash(), spec)
	return nil
}

func roleNames(rs []gateway.Role) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return out
}
