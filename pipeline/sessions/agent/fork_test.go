package agent

import (
	"context"
	"errors"
	"testing"

	"github.com/forklab/forklab/pipeline/analysis/policy"
	"github.com/forklab/forklab/pipeline/lab/fork"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/pipeline/sessions/sessiontest"
	"github.com/forklab/forklab/stream/client"
)

// Forking a session of a world registered only in this test: an arm the
// world lacks and a guard rule of another world are refused before the
// child stream is created; a fork finishes the branch, and forking again
// into the same child finds it finished.
func TestForkChecksTheWorldFirst(t *testing.T) {
	sessiontest.Register(t)
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	st := tiny(t, 11)
	var tail string
	if _, err := (&Worker{Log: c, Stream: "t", Start: &st, Until: 2, OnAppend: func(_ session.Event, tl string) { tail = tl }}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	counterRule := policy.Rule{Version: policy.Version, World: "counter", WorldVersion: "2", All: []policy.Condition{{Feature: "same_obs", Op: "=", Value: true}}}
	for _, tc := range []struct {
		arm  fork.Arm
		rule *policy.Rule
		want error
	}{{fork.Placebo, nil, ErrArm}, {fork.Policy, &counterRule, ErrRule}} {
		child := "t/refused-" + string(tc.arm)
		if _, err := Fork(ctx, Worker{Log: c}, "t", tail, child, 0, tc.arm, 0, tc.rule); !errors.Is(err, tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.arm, err, tc.want)
		}
		if _, err := c.Head(ctx, child); !client.IsNotFound(err) {
			t.Fatalf("%s: the refused fork created %s (%v)", tc.arm, child, err)
		}
	}
	res, err := Fork(ctx, Worker{Log: c}, "t", tail, "t/on", 0, fork.On, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Session
	if !s.Finished() || s.Branch.ForkStep != 2 || s.Branch.Recovery != "peek" || s.Decl.Name != sessiontest.Name {
		t.Fatalf("branch: finished %t, %+v, world %s", s.Finished(), s.Branch, s.Decl.Name)
	}
	again, err := Fork(ctx, Worker{Log: c}, "t", tail, "t/on", 0, fork.On, 0, nil)
	if !errors.Is(err, ErrFinished) || string(again.Session.Outcome.Encode()) != string(s.Outcome.Encode()) {
		t.Fatalf("forking again: %v", err)
	}
}
