package agent

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/agentflow/agentflow/internal/words"
)

// Derived ids: one rule for every id a door derives rather than takes
// from its client — a Telegram update's turn and a Telegram person's
// session, an MCP call's turn, a schedule's runs.
//
// A job id names one request and a session id one conversation, so a
// derived id that someone else could name first would let them take it:
// the door's own request would then be a Conflict, its person never
// answered. Two parts keep that from happening:
//
//   - Reserved: every derived id begins with DerivedPrefix ("af:"), then
//     the door's channel and ':'; no client may name an id that begins
//     with DerivedPrefix as a job id or session id, at any door of the
//     gateway or through the starter (CheckClientID). Only a door that
//     derived an id starts a turn or sends a message under it.
//   - Keyed when it must be stable: an id that names the same thing every
//     time (a redelivered Telegram update, an MCP call sent again) is a
//     MAC of what it names under a secret of the request's credential
//     (the bot's webhook secret, the MCP session), so that no one else
//     can work it out in advance (KeyedID). An id that must be readable
//     and stable across a rotated secret, such as a person's session,
//     is DerivedID: reserved, not secret.
//
// Ids a door derives fresh each time (NewJobID's random ids, A2A's) need
// neither: no one can name them first.

// DerivedPrefix begins every id a door derives.
const DerivedPrefix = "af:"

// personDoors are the doors whose derived ids are a person's: the door
// speaks for someone who holds no token of the tenant (a Telegram chat's
// sender), so their sessions and turns are not the tenant's users' to
// read (OfPerson).
var personDoors = []string{ChannelTelegram}

// DerivedID is a readable derived id of door: "af:<door>:<part>:<part>…".
// A part that is empty, holds ':' or begins with '~', or an id longer
// than MaxKeyLength, makes it "af:<door>:~<hash of the parts>" instead,
// so that two lists of parts never give one id.
func DerivedID(door string, parts ...string) string {
	id := DerivedPrefix + door + ":" + strings.Join(parts, ":")
	plain := len(id) <= MaxKeyLength && !slices.ContainsFunc(parts, func(p string) bool {
		return p == "" || strings.Contains(p, ":") || strings.HasPrefix(p, "~")
	})
	if plain {
		return id
	}
	sum := sha256.Sum256([]byte(door + "\x00" + strings.Join(parts, "\x00")))
	return DerivedPrefix + door + ":~" + hex.EncodeToString(sum[:16])
}

// KeyedID is a derived id of door that only a holder of key can work
// out: "af:<door>:" and 128 bits of the HMAC-SHA256 of the parts under
// key, the same for the same key and parts.
func KeyedID(door string, key []byte, parts ...string) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(door))
	for _, p := range parts {
		mac.Write([]byte{0})
		mac.Write([]byte(p))
	}
	return DerivedPrefix + door + ":" + hex.EncodeToString(mac.Sum(nil)[:16])
}

// IsDerivedID reports whether id is reserved for a door's derived ids.
func IsDerivedID(id string) bool { return strings.HasPrefix(id, DerivedPrefix) }

// DerivedDoor is the door a derived id names, "" for an id no door
// derived.
func DerivedDoor(id string) string {
	rest, ok := strings.CutPrefix(id, DerivedPrefix)
	if !ok {
		return ""
	}
	door, _, _ := strings.Cut(rest, ":")
	return door
}

// OfPerson reports whether id — a job id, or a session id — is one a
// door derived for a person it speaks for (a Telegram chat's sender):
// that person's session, or a turn of it and the turns those delegate
// to, whose job ids begin with the turn's.
func OfPerson(id string) bool { return slices.Contains(personDoors, DerivedDoor(id)) }

// PersonIDPrefixes are the prefixes of the ids OfPerson reports, for
// listings that leave them out.
func PersonIDPrefixes() []string {
	out := make([]string, len(personDoors))
	for i, d := range personDoors {
		out[i] = DerivedPrefix + d + ":"
	}
	return out
}

// CheckClientID refuses an id a client names (field: job_id,
// session_id, …) that is reserved for the ids doors derive.
func CheckClientID(field, id string) error {
	if !IsDerivedID(id) {
		return nil
	}
	return Errorf(CodeInvalid, "%s %q begins with %q, which is reserved for the ids agentflow's doors derive (a Telegram update's turn, a person's session, an MCP call, a schedule's runs): choose an id that does not",
		field, words.Clip(id, 100), DerivedPrefix)
}
