// Package evals reads evaluation datasets, scores a turn's result against
// a case, and writes reports: the parts of the evaluation harness that
// neither the workflow nor the store own. The Evaluation workflow
// (workflows/eval.go) runs the cases as durable turns; the ScoreEvalCase
// activity scores each with Score (and a judge model when the case asks
// for one); `starter eval` and the gateway's EvalService show the runs
// with Markdown, HTML and Compare. Record makes a dataset of a tenant's
// recorded turns, by reference; ScoreReplay compares a replayed case with
// its recording (the tool runtime, activities, serves the recorded tool
// results).
//
// It imports only the domain and internal/structured: it must not import
// the workflows, the activities or the store, which call it.
package evals
