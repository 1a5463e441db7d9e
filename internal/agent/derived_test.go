package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDerivedID(t *testing.T) {
	long := strings.Repeat("a", MaxKeyLength)
	for _, tt := range []struct {
		name  string
		parts []string
		want  string // "" for the hashed form
	}{
		{"readable", []string{"assistant", "tg", "-1001234", "7"}, "af:telegram:assistant:tg:-1001234:7"},
		{"a part with ':'", []string{"a:b", "tg"}, ""},
		{"a part that looks hashed", []string{"~x"}, ""},
		{"an empty part", []string{"assistant", ""}, ""},
		{"too long", []string{long}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := DerivedID(ChannelTelegram, tt.parts...)
			if tt.want != "" {
				require.Equal(t, tt.want, id)
			} else {
				require.Regexp(t, `^af:telegram:~[0-9a-f]{32}$`, id)
			}
			require.True(t, IsDerivedID(id))
			require.Equal(t, ChannelTelegram, DerivedDoor(id))
			require.True(t, OfPerson(id))
			require.NoError(t, ValidateID("session_id", id), "a derived id is a valid session id")
			require.Equal(t, id, DerivedID(ChannelTelegram, tt.parts...), "stable")
		})
	}
	// Parts that would join alike give two ids.
	require.NotEqual(t, DerivedID("telegram", "a:b", "c"), DerivedID("telegram", "a", "b:c"))
	require.NotEqual(t, DerivedID("telegram", "a", "b"), DerivedID("mcp", "a", "b"))
}

func TestKeyedID(t *testing.T) {
	id := KeyedID(ChannelTelegram, []byte("secret-1"), "demo", "assistant", "tg", "1001")
	require.Regexp(t, `^af:telegram:[0-9a-f]{32}$`, id)
	require.Equal(t, id, KeyedID(ChannelTelegram, []byte("secret-1"), "demo", "assistant", "tg", "1001"), "the same update, the same id")
	for name, other := range map[string]string{
		"another key":    KeyedID(ChannelTelegram, []byte("secret-2"), "demo", "assistant", "tg", "1001"),
		"another update": KeyedID(ChannelTelegram, []byte("secret-1"), "demo", "assistant", "tg", "1002"),
		"parts joined":   KeyedID(ChannelTelegram, []byte("secret-1"), "demo", "assistanttg", "", "1001"),
		"another door":   KeyedID(ChannelMCP, []byte("secret-1"), "demo", "assistant", "tg", "1001"),
	} {
		require.NotEqual(t, id, other, name)
	}
	require.True(t, OfPerson(id))
	mcp := KeyedID(ChannelMCP, []byte("session"), "1")
	require.True(t, IsDerivedID(mcp))
	require.False(t, OfPerson(mcp), "an MCP call's turn is its caller's own")
}

func TestCheckClientID(t *testing.T) {
	for id, reserved := range map[string]bool{
		"":                             false,
		"job-1":                        false,
		"telegram-assistant-tg-1001":   false,
		"AF:telegram:x":                false,
		"turn/demo/af:schedule:x":      false,
		"af:":                          true,
		"af:telegram:0123456789abcdef": true,
		"af:anything":                  true,
	} {
		err := CheckClientID("job_id", id)
		if !reserved {
			require.NoError(t, err, id)
			continue
		}
		require.True(t, IsCode(err, CodeInvalid), id)
		require.ErrorContains(t, err, `job_id "`+id+`" begins with "af:", which is reserved`)
	}
	require.False(t, OfPerson("job-1"))
	require.Empty(t, DerivedDoor("job-1"))
}
