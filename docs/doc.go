// Package docs holds agentflow's documentation — the Markdown pages of
// this folder, embedded — and its checks: every relative link and anchor
// of the repository's Markdown resolves, and README.md's package map
// lists exactly the packages the module has.
//
// Tests elsewhere run the recipes these pages show (a catalog loaded, a
// curl recipe run against a real server); they read a page's section and
// its fenced blocks through Section and Blocks, so that a page can move
// without its recipes going untested.
//
// It imports only the standard library.
package docs
