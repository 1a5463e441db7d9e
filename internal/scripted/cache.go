package scripted

import (
	"bytes"
	"cmp"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
)

// PromptCache is a script's prompt cache, as providers run theirs: a
// request's prompt is cut into blocks, and the blocks at its start that an
// earlier request of the same cache key sent too are read from the cache.
// Zero fields take their defaults.
type PromptCache struct {
	// MinTokens is the shortest prompt cached, and the fewest cached
	// tokens reported: below it a request reads and writes nothing, as
	// OpenAI caches prompts of 1,024 tokens or more. Default 1024.
	MinTokens int `yaml:"min_tokens"`
	// BlockTokens is the size of a block: cached tokens come in whole
	// blocks, as OpenAI's come in steps of 128. Default 128.
	BlockTokens int `yaml:"block_tokens"`
	// MaxBlocks bounds the blocks the server remembers, over all keys;
	// the least recently used go first. Default 65,536 (a few MiB).
	MaxBlocks int `yaml:"max_blocks"`
}

// Defaults of PromptCache.
const (
	DefaultCacheMinTokens   = 1024
	DefaultCacheBlockTokens = 128
	DefaultCacheMaxBlocks   = 1 << 16
)

// Bounds of PromptCache's fields: far beyond any provider's, and small
// enough that a block's size in bytes is an int.
const (
	maxCacheTokens = 1 << 24
	maxCacheBlocks = 1 << 24
)

// bytesPerToken is the estimate of a token's size in the prompt's text,
// about what tokenizers of English and JSON give.
const bytesPerToken = 4

func (c *PromptCache) validate() error {
	if c == nil {
		return nil
	}
	if c.MinTokens < 0 || c.BlockTokens < 0 || c.MaxBlocks < 0 {
		return errors.New("prompt_cache: min_tokens, block_tokens and max_blocks must not be negative")
	}
	if c.MinTokens > maxCacheTokens || c.BlockTokens > maxCacheTokens || c.MaxBlocks > maxCacheBlocks {
		return fmt.Errorf("prompt_cache: min_tokens and block_tokens must be at most %d, max_blocks at most %d", maxCacheTokens, maxCacheBlocks)
	}
	return nil
}

func (c PromptCache) withDefaults() PromptCache {
	c.MinTokens = cmp.Or(c.MinTokens, DefaultCacheMinTokens)
	c.BlockTokens = cmp.Or(c.BlockTokens, DefaultCacheBlockTokens)
	c.MaxBlocks = cmp.Or(c.MaxBlocks, DefaultCacheMaxBlocks)
	return c
}

// cacheHints are what a request says about caching besides its prompt:
// the key its cached prefixes are kept under, and for Anthropic where its
// cache_control breakpoints are (a breakpoint on a message is
// Message.CacheControl).
type cacheHints struct {
	key                 string // OpenAI's prompt_cache_key, else its user
	tools, system, auto bool   // Anthropic: breakpoints on a tool, a system block, the request
}

// promptCache remembers the blocks of the prompts it was sent, each by
// the hash of the prompt up to its end (the hash of the block chained to
// the hash of the blocks before it), so that a block is found only after
// the same prefix, and memory is a hash per block whatever the prompts'
// length. Safe for concurrent use.
type promptCache struct {
	cfg  PromptCache
	seed maphash.Seed

	mu     sync.Mutex
	recent *list.List // of uint64 hashes, the most recently used first
	blocks map[uint64]*list.Element
}

func newPromptCache(cfg PromptCache) *promptCache {
	return &promptCache{cfg: cfg.withDefaults(), seed: maphash.MakeSeed(), recent: list.New(), blocks: map[uint64]*list.Element{}}
}

// cacheUse is what the cache counted for one request, in tokens: the
// prompt, the part read from the cache, and the part written to it.
type cacheUse struct {
	prompt, cached, written int
}

// use counts a request's prompt, reads the cached part of it and writes
// the rest of its cacheable part: the whole prompt for OpenAI, up to the
// last cache_control breakpoint for Anthropic (nothing without one).
func (c *promptCache) use(rec Request) cacheUse {
	text, cacheable := promptText(rec)
	u := cacheUse{prompt: (len(text) + bytesPerToken - 1) / bytesPerToken}
	if u.prompt < c.cfg.MinTokens {
		return u
	}
	hashes := c.chain(rec, text[:cacheable])
	c.mu.Lock()
	defer c.mu.Unlock()
	hit := 0
	for hit < len(hashes) && c.blocks[hashes[hit]] != nil {
		hit++
	}
	if hit*c.cfg.BlockTokens < c.cfg.MinTokens {
		hit = 0
	}
	// The last block first, so that a prompt's first blocks are the most
	// recently used and the last to go: a block is of no use without the
	// blocks before it.
	for i := len(hashes) - 1; i >= 0; i-- {
		c.touch(hashes[i])
	}
	u.cached = hit * c.cfg.BlockTokens
	u.written = (len(hashes) - hit) * c.cfg.BlockTokens
	return u
}

// chain returns the chained hash of each whole block of text, seeded with
// the request's API, model and key: a cache per key and model.
func (c *promptCache) chain(rec Request, text []byte) []uint64 {
	size := c.cfg.BlockTokens * bytesPerToken
	var h maphash.Hash
	h.SetSeed(c.seed)
	_, _ = h.WriteString(rec.API + "\x00" + rec.Model + "\x00" + rec.hints.key)
	prev := h.Sum64()
	hashes := make([]uint64, 0, len(text)/size)
	for end := size; end <= len(text); end += size {
		h.Reset()
		_, _ = h.Write(binary.LittleEndian.AppendUint64(nil, prev))
		_, _ = h.Write(text[end-size : end])
		prev = h.Sum64()
		hashes = append(hashes, prev)
	}
	return hashes
}

// touch marks a block as used now, remembering it if it is new and
// forgetting the least recently used beyond MaxBlocks. Called with mu
// held.
func (c *promptCache) touch(hash uint64) {
	if e := c.blocks[hash]; e != nil {
		c.recent.MoveToFront(e)
		return
	}
	c.blocks[hash] = c.recent.PushFront(hash)
	for c.recent.Len() > c.cfg.MaxBlocks {
		last := c.recent.Back()
		c.recent.Remove(last)
		delete(c.blocks, last.Value.(uint64))
	}
}

// promptText is a request's prompt as the cache and the token estimate
// see it — the tools as sent, then (Anthropic) the system prompt, then
// each message: its role, text, the reasoning sent back, its tool calls'
// ids, names and arguments, the id of the call it answers and what its
// other parts are — and how much of it is cacheable.
func promptText(rec Request) (text []byte, cacheable int) {
	var b bytes.Buffer
	b.WriteString(rec.ToolsJSON)
	breakpoint := 0
	if rec.hints.tools {
		breakpoint = b.Len()
	}
	if rec.API == APIAnthropic {
		b.WriteString(rec.System)
		if rec.hints.system {
			breakpoint = b.Len()
		}
	}
	for _, m := range rec.Messages {
		writeMessage(&b, m)
		if m.CacheControl {
			breakpoint = b.Len()
		}
	}
	if rec.API != APIAnthropic || rec.hints.auto {
		breakpoint = b.Len()
	}
	return b.Bytes(), breakpoint
}

func writeMessage(b *bytes.Buffer, m Message) {
	fields := []string{m.Role, m.Content, m.Reasoning, m.ToolCallID}
	for _, tc := range m.ToolCalls {
		fields = append(fields, tc.ID, tc.Name, tc.Arguments)
	}
	for _, p := range m.Parts {
		if p.Type != "text" {
			fields = append(fields, p.Type, p.URL, p.FileID, p.DataSHA256)
		}
	}
	b.WriteString(strings.Join(fields, "\n"))
	b.WriteByte('\n')
}
