package agent

import (
	"context"
	"errors"
	"strings"
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

// A fork point with no run to fork is refused before anything is written,
// whatever the offset names (the QA report): -1, the offset after the
// incarnation event, after session_start, after the outcome; now is the
// tail; an offset inside the first turn completes it. A child the fork
// created is deleted when a later step fails (here: the offset right
// after the stream's create record, which the log accepts and which holds
// no session_start).
func TestForkPointsWithNothingToFork(t *testing.T) {
	svc := startLog(t, "127.0.0.1:0", t.TempDir())
	c := client.New(svc.URL)
	ctx := context.Background()
	info, _, err := c.Create(ctx, "s", client.CreateOptions{ContentType: ContentType})
	if err != nil {
		t.Fatal(err)
	}
	created := info.Tail
	st := start(t, "counter", nil, fork.Model{}, 5)
	var tails []string // after each domain event
	if _, err := (&Worker{Log: c, Stream: "s", Start: &st, OnAppend: func(_ session.Event, tl string) { tails = append(tails, tl) }}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	var offsets []string // after each record: the incarnation, then tails
	for at := client.Start; ; {
		ch, err := c.ReadMax(ctx, "s", at, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ch.Data) > 2 {
			offsets = append(offsets, ch.Next)
		}
		if ch.UpToDate {
			break
		}
		at = ch.Next
	}
	if len(offsets) != len(tails)+1 || offsets[1] != tails[0] {
		t.Fatalf("offsets %v, tails %v", offsets, tails)
	}
	last := offsets[len(offsets)-1]
	for _, tc := range []struct {
		name, offset, want string
	}{
		{"the beginning", client.Start, "s at -1 (the beginning): no turn has been played at this offset, so there is nothing to fork; fork at an offset after step 1"},
		{"after the incarnation", offsets[0], "s at " + offsets[0] + ": no turn has been played at this offset"},
		{"after session_start", offsets[1], "s at " + offsets[1] + ": no turn has been played at this offset"},
		{"after the outcome", last, "s at " + last + ": the run had already ended at this offset; nothing to fork"},
		{"now", Now, "s at " + last + ": the run had already ended at this offset; nothing to fork"},
	} {
		child := "s/refused"
		_, err := Fork(ctx, Worker{Log: c}, "s", tc.offset, child, 0, fork.On, 0, nil)
		if !errors.Is(err, ErrNothingToFork) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
		if _, err := c.Head(ctx, child); !client.IsNotFound(err) {
			t.Errorf("%s: the refused fork created %s (%v)", tc.name, child, err)
		}
	}
	// Inside the first turn (after its model_turn): the turn completes,
	// the branch forks at step 1.
	res, err := Fork(ctx, Worker{Log: c}, "s", offsets[2], "s/turn1", 0, fork.On, 0, nil)
	if err != nil || res.Session.Branch == nil || res.Session.Branch.ForkStep != 1 || !res.Session.Finished() {
		t.Fatalf("fork inside the first turn: %v, %+v", err, res.Session.Branch)
	}
	// The log accepts the offset after the create record; its fold has no
	// session_start: refused, and the child it made is gone again.
	_, err = Fork(ctx, Worker{Log: c}, "s", created, "s/empty", 0, fork.On, 0, nil)
	if !errors.Is(err, session.ErrFold) {
		t.Fatalf("fork at the create record: %v", err)
	}
	if _, err := c.Head(ctx, "s/empty"); !client.IsNotFound(err) && !client.IsGone(err) {
		t.Fatalf("the failed fork left its child stream (%v)", err)
	}
	if _, err := Fork(ctx, Worker{Log: c}, "s", created, "s/empty", 0, fork.On, 0, nil); !errors.Is(err, session.ErrFold) {
		t.Fatalf("the same fork again: %v (want the same refusal)", err)
	}
}
