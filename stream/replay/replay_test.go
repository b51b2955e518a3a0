// Package replay_test checks the replay recipes of the session log's
// README and docs/session-log.md: kcat piped into replay.jq, and the kafkajs
// script replay.mjs, against every kind of stream the HTTP API can make.
// Each recipe must print exactly what the API reads, from the beginning and
// from every offset the API issued.
package replay_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/forklab/forklab/stream/client"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

const textPlain = "text/plain"

// kcatReady reports whether kcat and jq are installed. Without them the
// kcat recipe is skipped, unless FORKLAB_REQUIRE_KCAT is set (CI sets it).
func kcatReady(t *testing.T) bool {
	for _, tool := range []string{"kcat", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("FORKLAB_REQUIRE_KCAT") != "" {
				t.Fatalf("%s is not installed and FORKLAB_REQUIRE_KCAT is set (apt-get install kcat jq)", tool)
			}
			t.Logf("%s is not installed: skipping the kcat recipe (apt-get install kcat jq)", tool)
			return false
		}
	}
	return true
}

// kafkajsReady installs the kafkajs script's dependencies when they are
// missing (npm ci). Without node and npm the kafkajs recipe is skipped,
// unless FORKLAB_REQUIRE_KAFKAJS is set (CI sets it).
func kafkajsReady(t *testing.T) bool {
	fail := func(format string, args ...any) bool {
		if os.Getenv("FORKLAB_REQUIRE_KAFKAJS") != "" {
			t.Fatalf(format+" and FORKLAB_REQUIRE_KAFKAJS is set", args...)
		}
		t.Logf("skipping the kafkajs recipe: "+format, args...)
		return false
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fail("%s is not installed", tool)
		}
	}
	if _, err := os.Stat("node_modules/kafkajs/package.json"); err == nil {
		return true
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail("npm ci failed: %v\n%s", err, out)
	}
	return true
}

// stream is one stream the test made, and the offsets the API issued for it.
type stream struct {
	name    string
	json    bool
	binary  bool   // not UTF-8: the kcat recipe (jq decodes text) must refuse it, naming replay.mjs
	want    string // what a read from the beginning returns, when the test knows; "" otherwise
	offsets []string
}

// TestReplayRecipes builds streams of every kind through the API (text with
// newlines and tabs, JSON with flattened arrays, re-created generations,
// forks at offsets and sub-offsets, forks of forks, closed, binary, a
// record Kafka holds twice), and through the service every case of the
// log's fold that kafkalog.Replay's test covers (TestReplayMatchesService):
// writes that land late, after and before their retry, after a close,
// after a new producer epoch and after a higher Stream-Seq, a lost answer,
// a create landing after its retry created the next generation, copies of
// a stream's latest record, of its create and of older records, and a fork
// whose create lands after its source was soft-deleted. Then it replays
// each stream with both recipes from the beginning and from every offset
// the API issued for it, and compares them with the API byte for byte.
func TestReplayRecipes(t *testing.T) {
	useKcat, useJS := kcatReady(t), kafkajsReady(t)
	if !useKcat && !useJS {
		t.Skip("neither kcat nor node is available")
	}
	dir := t.TempDir()
	startSvc := func() *service.Service {
		svc, err := service.Start(context.Background(), service.Config{
			Addr: "127.0.0.1:0", DataDir: dir, NoSync: true,
			Log:    kafkalog.Config{Partitions: 2, Logf: func(string, ...any) {}},
			Server: server.Config{ReadChunkBytes: 1}, // a chunk per record: every offset a read can issue
		})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svc := startSvc()
	w := &writer{t: t, svc: svc, c: client.New(svc.URL), answers: map[string][]string{}}
	streams := build(t, w)
	streams = append(streams, buildLate(t, w)...)
	ctx := context.Background()
	live := map[string][]byte{}
	for _, st := range streams {
		live[st.name] = apiRead(t, w.c, st, client.Start)
	}
	// The replay must match a service that rebuilt its state from Kafka
	// too, and the rebuild must read what the live service read.
	svc.Close(ctx)
	svc = startSvc()
	defer svc.Close(ctx)
	c := client.New(svc.URL)
	for i, st := range streams {
		got := apiRead(t, c, st, client.Start)
		if !bytes.Equal(got, live[st.name]) {
			t.Fatalf("%s: the service read %q live and %q after a restart", st.name, live[st.name], got)
		}
		if st.want != "" && string(got) != st.want {
			t.Fatalf("%s: the service reads %q, want %q", st.name, got, st.want)
		}
		streams[i].offsets = issued(t, svc, st.name)
		// The offsets writes were answered with, that the service still
		// accepts (a copy that moved a record's entry retires the offset
		// after its first copy).
		for _, off := range w.answers[st.name] {
			if _, err := c.Read(ctx, st.name, off); err == nil && !contains(streams[i].offsets, off) {
				streams[i].offsets = append(streams[i].offsets, off)
			}
		}
	}

	parts := map[int]bool{}
	var jobs []job
	for _, st := range streams {
		info, err := c.Head(ctx, st.name)
		if err != nil {
			t.Fatal(err)
		}
		parts[info.Partition] = true
		for _, from := range append([]string{client.Start}, st.offsets...) {
			jobs = append(jobs, job{st, from, info.Partition, apiRead(t, c, st, from)})
		}
	}
	if len(parts) != 2 {
		t.Fatalf("the streams are in partitions %v, want both", parts)
	}
	t.Logf("%d streams, %d replays to check", len(streams), len(jobs))
	if useKcat {
		// The documented pipeline (kcat | jq) for every stream from the
		// beginning; from the other offsets, the same jq program on the
		// same kcat output, captured once per partition.
		records := map[int][]byte{}
		for part := range parts {
			out, err := exec.Command("kcat", kcatArgs(svc, part)...).Output()
			if err != nil {
				t.Fatalf("kcat: %v", err)
			}
			records[part] = out
		}
		parallel(t, jobs, 4, func(j job) {
			var got []byte
			var err error
			if j.from == client.Start {
				got, err = kcatReplay(svc, j.part, j.st.name, j.from)
			} else {
				got, err = jqReplay(records[j.part], j.st.name, j.from)
			}
			if j.st.binary {
				// Bytes jq cannot hold: an error naming replay.mjs,
				// never other bytes. (Past the last such byte the
				// replay is exact.) It used to print U+FFFD for
				// each byte that is not UTF-8, and drop half a
				// character at a sub-offset, exiting 0.
				if err == nil && j.from == client.Start {
					t.Errorf("kcat recipe, %s from the beginning: exit 0 with %q, want an error naming replay.mjs", j.st.name, got)
				}
				if err != nil {
					if !strings.Contains(err.Error(), "replay this stream with replay.mjs") {
						t.Errorf("kcat recipe, %s from %s: %v, want an error naming replay.mjs", j.st.name, j.from, err)
					}
					return
				}
			}
			if err != nil {
				t.Errorf("kcat recipe, %s from %s: %v", j.st.name, j.from, err)
				return
			}
			same(t, "kcat recipe", j.st, j.from, got, j.want)
		})
	}
	if useJS {
		// The documented command for every stream from the beginning
		// (kafkajs joins a consumer group per run: a second or two, four at
		// a time); from every offset, replay.mjs's own reader and fold in
		// one process per partition (testdata/replay_many.mjs).
		var starts []job
		for _, j := range jobs {
			if j.from == client.Start {
				starts = append(starts, j)
			}
		}
		parallel(t, starts, 4, func(j job) {
			got, err := jsReplay(svc, j.part, j.st.name, j.from)
			if err != nil {
				t.Errorf("kafkajs recipe, %s from %s: %v", j.st.name, j.from, err)
				return
			}
			same(t, "kafkajs recipe", j.st, j.from, got, j.want)
		})
		for part := range parts {
			var some []job
			for _, j := range jobs {
				if j.part == part {
					some = append(some, j)
				}
			}
			outs, err := jsReplayMany(svc, part, some)
			if err != nil {
				t.Fatalf("kafkajs recipe, partition %d: %v", part, err)
			}
			for i, j := range some {
				if outs[i].err != "" {
					t.Errorf("kafkajs recipe, %s from %s: %s", j.st.name, j.from, outs[i].err)
					continue
				}
				same(t, "kafkajs recipe", j.st, j.from, outs[i].out, j.want)
			}
		}
	}

	// A deleted stream is not replayed: both recipes fail and print
	// nothing, in the partition it was in and in the other one. So is a
	// soft-deleted one (late/src: forks inherit from it).
	gone, err := c.Head(ctx, "gone")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	src, err := c.Head(ctx, "late/src/f1") // a fork is in its source's partition
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []struct {
		name         string
		part, status int
	}{{"gone", gone.Partition, http.StatusNotFound}, {"late/src", src.Partition, http.StatusGone}} {
		if _, err := c.Head(ctx, d.name); client.StatusCode(err) != d.status {
			t.Fatalf("HEAD of deleted %s: %v, want %d", d.name, err, d.status)
		}
		for _, part := range []int{d.part, 1 - d.part} {
			if useKcat {
				if out, err := kcatReplay(svc, part, d.name, client.Start); err == nil || len(out) > 0 {
					t.Fatalf("kcat recipe of deleted %s: %q %v, want an error and no output", d.name, out, err)
				}
			}
		}
		if useJS {
			if out, err := jsReplay(svc, d.part, d.name, client.Start); err == nil || len(out) > 0 {
				t.Fatalf("kafkajs recipe of deleted %s: %q %v, want an error and no output", d.name, out, err)
			}
		}
	}

	// Bad input: text that is not an offset, an offset of the other
	// partition. Both recipes say so and print nothing; the kafkajs one
	// exits 2.
	var st job // a read from an offset the API issued
	for _, j := range jobs {
		if j.from != client.Start {
			st = j
		}
	}
	for _, bad := range []struct {
		from string
		part int
		why  string
	}{
		{"12", st.part, "not an offset the API returned"},
		{st.from, 1 - st.part, fmt.Sprintf("is an offset of partition %d", st.part)},
	} {
		part := bad.part
		if useKcat {
			out, err := kcatReplay(svc, part, st.st.name, bad.from)
			if err == nil || len(out) > 0 || !strings.Contains(err.Error(), bad.why) {
				t.Errorf("kcat recipe from %s in partition %d: %q %v, want an error saying %q", bad.from, part, out, err, bad.why)
			}
		}
		if useJS {
			out, err := jsReplay(svc, part, st.st.name, bad.from)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 || len(out) > 0 || !strings.Contains(err.Error(), bad.why) {
				t.Errorf("kafkajs recipe from %s in partition %d: %q %v, want exit 2 saying %q", bad.from, part, out, err, bad.why)
			}
		}
	}
}

// job is one replay to check: a stream from an offset, and what the API
// reads there.
type job struct {
	st   stream
	from string
	part int
	want []byte
}

// parallel runs f on every job, n at a time.
func parallel(t *testing.T, jobs []job, n int, f func(job)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, n)
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f(j)
		}()
	}
	wg.Wait()
}

// same compares a recipe's output with the API's read, byte for byte.
func same(t *testing.T, recipe string, st stream, from string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Errorf("%s, %s from %s: %q, the API reads %q", recipe, st.name, from, got, want)
	}
}

// kcatArgs are the documented kcat arguments: the partition, from the
// beginning to its end, as JSON.
func kcatArgs(svc *service.Service, part int) []string {
	return []string{"-C", "-b", svc.Brokers[0], "-t", svc.Log.Topic(), "-p", strconv.Itoa(part), "-o", "beginning", "-e", "-q", "-J"}
}

// jqReplay runs the documented jq program on kcat's output.
func jqReplay(records []byte, name, from string) ([]byte, error) {
	cmd := exec.Command("jq", "-n", "-j", "--arg", "stream", name, "--arg", "from", from, "-f", "replay.jq")
	cmd.Stdin = bytes.NewReader(records)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// kcatReplay runs the documented kcat recipe, as a shell pipeline.
func kcatReplay(svc *service.Service, part int, name, from string) ([]byte, error) {
	script := fmt.Sprintf(`kcat %s | jq -n -j --arg stream "$STREAM" --arg from "$FROM" -f replay.jq`,
		strings.Join(kcatArgs(svc, part), " "))
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Env = append(os.Environ(), "STREAM="+name, "FROM="+from)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// jsReplay runs the documented kafkajs recipe.
func jsReplay(svc *service.Service, part int, name, from string) ([]byte, error) {
	cmd := exec.Command("node", "replay.mjs", "--brokers", strings.Join(svc.Brokers, ","), "--topic", svc.Log.Topic(),
		"--partition", strconv.Itoa(part), "--stream", name, "--from", from)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, stderr.String())
	}
	return out, nil
}

// replayed is what replay.mjs prints for one job, or its error.
type replayed struct {
	out []byte
	err string
}

// jsReplayMany runs testdata/replay_many.mjs: replay.mjs's reader and
// fold for every job of partition part, reading the partition once.
func jsReplayMany(svc *service.Service, part int, jobs []job) ([]replayed, error) {
	var in bytes.Buffer
	enc := json.NewEncoder(&in)
	for _, j := range jobs {
		if err := enc.Encode(map[string]string{"stream": j.st.name, "from": j.from}); err != nil {
			return nil, err
		}
	}
	cmd := exec.Command("node", "testdata/replay_many.mjs", strings.Join(svc.Brokers, ","), svc.Log.Topic(), strconv.Itoa(part))
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, stderr.String())
	}
	var res []replayed
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var line struct {
			Out []byte `json:"out"`
			Err string `json:"err"`
		}
		if err := dec.Decode(&line); err != nil {
			return nil, err
		}
		res = append(res, replayed{line.Out, line.Err})
	}
	if len(res) != len(jobs) {
		return nil, fmt.Errorf("%d answers to %d jobs", len(res), len(jobs))
	}
	return res, nil
}

// build makes the streams of every kind through the API.
func build(t *testing.T, w *writer) []stream {
	t.Helper()
	ctx := context.Background()
	c := w.c
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []stream
	track := func(st stream) { out = append(out, st) }
	appendAll, create := w.appendAll, w.create

	// Text with the characters that broke the old recipe: newlines, tabs,
	// commas and '=' (kcat's header and field separators), CRLF.
	create("text", textPlain, "a\tb\n")
	offs := appendAll("text", textPlain, "line1\nline2\t,x=y", "k=v,\"q\"\r\n", "\n\n")
	track(stream{name: "text"})

	// Three generations of one name: only the last is replayed.
	create("regen", textPlain, "old1\n")
	appendAll("regen", textPlain, "old2\t")
	must(c.Delete(ctx, "regen"))
	create("regen", textPlain, "middle\n")
	must(c.Delete(ctx, "regen"))
	create("regen", textPlain, "new1\n")
	appendAll("regen", textPlain, "new2\tend")
	track(stream{name: "regen"})

	// JSON: arrays flattened one level, strings with newlines and tabs, a
	// pretty-printed body, a number beyond float64.
	jf := create("json", "application/json", `[{"a":"x\ny"},{"b":2}]`)
	appendAll("json", "application/json", `{"c":"tab\there"}`, "[\n  {\"d\": 1},\n  {\"e\": [1, 2]}\n]", `12345678901234567890`)
	track(stream{name: "json", json: true})

	// Forks: at an offset, at a byte and a JSON sub-offset, a fork of a fork.
	_, err := c.Fork(ctx, "fork", "text", client.ForkOptions{At: offs[0]})
	must(err)
	appendAll("fork", textPlain, "fork-own\n")
	track(stream{name: "fork"})
	_, err = c.Fork(ctx, "fork-sub", "text", client.ForkOptions{At: "0000000000000000_0000000000000000", Sub: 3})
	must(err)
	appendAll("fork-sub", textPlain, "X")
	track(stream{name: "fork-sub"})
	_, err = c.Fork(ctx, "json-sub", "json", client.ForkOptions{At: jf, Sub: 1})
	must(err)
	appendAll("json-sub", "application/json", `{"own":1}`)
	track(stream{name: "json-sub", json: true})
	_, err = c.Fork(ctx, "fork-of-fork", "fork", client.ForkOptions{})
	must(err)
	appendAll("fork-of-fork", textPlain, "ff\n")
	track(stream{name: "fork-of-fork"})
	create("unicode", textPlain, "héllo wörld")
	_, err = c.Fork(ctx, "unicode-sub", "unicode", client.ForkOptions{At: "0000000000000000_0000000000000000", Sub: 3})
	must(err)
	track(stream{name: "unicode-sub"})
	// A sub-offset inside "é": the API returns "h" and é's first byte.
	_, err = c.Fork(ctx, "unicode-cut", "unicode", client.ForkOptions{At: "0000000000000000_0000000000000000", Sub: 2})
	must(err)
	track(stream{name: "unicode-cut", binary: true, want: "h\xc3"})

	// Closed, with its final data.
	_, _, err = c.Create(ctx, "closed", client.CreateOptions{ContentType: textPlain, Data: []byte("final\n"), Closed: true})
	must(err)
	track(stream{name: "closed"})

	// Binary: every byte value.
	bin := make([]byte, 256)
	for i := range bin {
		bin[i] = byte(i)
	}
	create("bin", "application/octet-stream", string(bin))
	appendAll("bin", "application/octet-stream", "\xff\xfe\x00")
	track(stream{name: "bin", binary: true})

	// A record Kafka holds twice, as a retried produce leaves it: the
	// later copy is the one the stream has (stream/kafkalog keeps it).
	create("dup", textPlain, "")
	appendAll("dup", textPlain, "d1;")
	w.copyRec("dup", 1)
	appendAll("dup", textPlain, "d2;")
	track(stream{name: "dup"})

	// Deleted later by the test; streams in both partitions sit around it.
	create("gone", textPlain, "bye")
	return out
}

// apiRead is what the API reads of a stream from an offset, chunk by
// chunk, joined as one read would return it: the bytes, or for a JSON
// stream one array of the chunks' messages, exactly as the server wrote
// them.
func apiRead(t *testing.T, c *client.Client, st stream, from string) []byte {
	t.Helper()
	var data []byte
	var msgs [][]byte
	for {
		ch, err := c.Read(context.Background(), st.name, from)
		if err != nil {
			t.Fatalf("%s from %s: %v", st.name, from, err)
		}
		if st.json {
			if in := bytes.TrimSpace(ch.Data[1 : len(ch.Data)-1]); len(in) > 0 {
				msgs = append(msgs, in)
			}
		} else {
			data = append(data, ch.Data...)
		}
		if ch.UpToDate {
			break
		}
		from = ch.Next
	}
	if st.json {
		return append(append([]byte("["), bytes.Join(msgs, []byte(","))...), ']')
	}
	return data
}

// issued is every offset a read of stream name from the beginning, one
// record at a time, issues.
func issued(t *testing.T, svc *service.Service, name string) []string {
	t.Helper()
	ctx := context.Background()
	c := client.New(svc.URL)
	var offs []string
	off := client.Start
	for {
		ch, err := c.Read(ctx, name, off)
		if err != nil {
			t.Fatalf("%s from %s: %v", name, off, err)
		}
		if ch.Next != off && !contains(offs, ch.Next) {
			offs = append(offs, ch.Next)
		}
		if ch.UpToDate {
			return offs
		}
		off = ch.Next
	}
}

func readAll(r interface{ Read([]byte) (int, error) }) ([]byte, error) {
	if r == nil {
		return nil, nil
	}
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// writer writes through the HTTP API and keeps, per stream, the offsets its
// writes were answered with (Stream-Next-Offset).
type writer struct {
	t         *testing.T
	svc       *service.Service
	c         *client.Client
	answers   map[string][]string
	producers int
}

// create creates stream name with an initial body and returns its tail.
func (w *writer) create(name, ct, body string) string {
	w.t.Helper()
	info, _, err := w.c.Create(context.Background(), name, client.CreateOptions{ContentType: ct, Data: []byte(body)})
	if err != nil {
		w.t.Fatal(err)
	}
	w.answers[name] = append(w.answers[name], info.Tail)
	return info.Tail
}

// appendAll appends each body with a producer of its own (seq 0; the
// Appender retries a 503 with the same seq) and returns the tails.
func (w *writer) appendAll(name, ct string, bodies ...string) []string {
	w.t.Helper()
	var next []string
	for _, b := range bodies {
		w.producers++
		r, err := w.c.NewAppender(name, "p-"+strconv.Itoa(w.producers), 0, ct).Append(context.Background(), []byte(b))
		if err != nil {
			w.t.Fatal(err)
		}
		w.answers[name] = append(w.answers[name], r.Next)
		next = append(next, r.Next)
	}
	return next
}

// post sends one POST to stream name — an append of body with headers h,
// a close when body is empty — once, and returns the status code.
func (w *writer) post(name string, h http.Header, body string) int {
	w.t.Helper()
	req, err := http.NewRequest(http.MethodPost, w.c.URL(name), strings.NewReader(body))
	if err != nil {
		w.t.Fatal(err)
	}
	if h != nil {
		req.Header = h.Clone()
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", textPlain)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK || res.StatusCode == http.StatusNoContent {
		w.answers[name] = append(w.answers[name], res.Header.Get("Stream-Next-Offset"))
	}
	return res.StatusCode
}

// producer is the producer headers of an append.
func producer(id string, epoch, seq int64) http.Header {
	return http.Header{"Producer-Id": {id}, "Producer-Epoch": {strconv.FormatInt(epoch, 10)},
		"Producer-Seq": {strconv.FormatInt(seq, 10)}}
}

// settle repeats a write while the service answers 503 (a write that
// lands behind records the service did not write is answered 503 and
// folded in; its retry is decided on what Kafka holds) and returns the
// status of the last attempt.
func (w *writer) settle(write func() int) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := write()
		if st != http.StatusServiceUnavailable || time.Now().After(deadline) {
			return st
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// barrier waits until the service has re-read Kafka after a failed write
// to the partition of stream name: an append the service refuses (409,
// a content type the stream does not have) is decided by the partition's
// goroutine after the re-read, and writes nothing.
func (w *writer) barrier(name string) {
	w.t.Helper()
	if st := w.post(name, http.Header{"Content-Type": {"application/x-barrier"}}, "x"); st != http.StatusConflict {
		w.t.Fatalf("barrier append to %s: %d, want 409", name, st)
	}
}

// hold runs write, one write through the API, with Kafka refusing its
// produce, and keeps the records the service produced; the write must be
// answered 503. land writes those records to the partition, byte for
// byte: to the service, a write it gave up on that lands late (what a
// produce Kafka held past the service's produce timeout does; see
// stream/kafkalog's lateLog.hold). The service learns of it when its next
// write to the partition lands behind it, or when it restarts.
func (w *writer) hold(write func() int) (land func()) {
	t := w.t
	t.Helper()
	var mu sync.Mutex
	var raw []byte
	part := int32(-1)
	f := w.svc.Broker.Cluster().Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: w.svc.Log.Topic(),
		Err: kerr.NotEnoughReplicas, Count: 1, // refused before the broker appends anything
		When: func(req kmsg.Request) bool {
			pr, ok := req.(*kmsg.ProduceRequest)
			if !ok {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tp := range pr.Topics {
				for _, p := range tp.Partitions {
					part, raw = p.Partition, bytes.Clone(p.Records)
				}
			}
			return true
		}})
	defer f.Remove()
	if st := write(); st != http.StatusServiceUnavailable || f.Hits() != 1 {
		t.Fatalf("write whose produce Kafka refuses: %d (refused %d times), want 503", st, f.Hits())
	}
	mu.Lock()
	defer mu.Unlock()
	recs := decodeBatch(t, raw)
	p := int(part)
	return func() {
		t.Helper()
		produce(t, w.svc, p, recs)
	}
}

// decodeBatch decodes the records of a produce request's record set.
func decodeBatch(t *testing.T, raw []byte) []kafka.Record {
	t.Helper()
	var rs protocol.RecordSet
	sized := binary.BigEndian.AppendUint32(nil, uint32(len(raw)))
	if _, err := rs.ReadFrom(bytes.NewBuffer(append(sized, raw...))); err != nil || rs.Records == nil {
		t.Fatalf("decode the held record set: %v", err)
	}
	var out []kafka.Record
	for {
		r, err := rs.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("decode the held record set: %v", err)
		}
		out = append(out, clone(r))
	}
	if len(out) == 0 {
		t.Fatal("the held produce carried no records")
	}
	return out
}

// clone copies a record out of the buffers it was read from.
func clone(r *kafka.Record) kafka.Record {
	key, _ := readAll(r.Key)
	val, _ := readAll(r.Value)
	hs := make([]kafka.Header, len(r.Headers))
	for i, h := range r.Headers {
		hs[i] = kafka.Header{Key: h.Key, Value: bytes.Clone(h.Value)}
	}
	return kafka.Record{Key: kafka.NewBytes(key), Value: kafka.NewBytes(val), Headers: hs}
}

// produce writes records to partition part of the service's data topic
// in one produce request, acks=all.
func produce(t *testing.T, svc *service.Service, part int, recs []kafka.Record) {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(svc.Brokers...), Timeout: 10 * time.Second}
	res, err := cl.Produce(context.Background(), &kafka.ProduceRequest{Topic: svc.Log.Topic(), Partition: part,
		RequiredAcks: kafka.RequireAll, Records: kafka.NewRecordReader(recs...)})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		t.Fatalf("produce to partition %d: %v", part, err)
	}
}

// copyRec writes record number rec of stream name's latest generation to
// Kafka again, headers and all, as a retried produce whose first attempt
// landed (or another tool) would.
func (w *writer) copyRec(name string, rec int64) {
	t := w.t
	t.Helper()
	ctx := context.Background()
	info, err := w.c.Head(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cl := &kafka.Client{Addr: kafka.TCP(w.svc.Brokers...), Timeout: 10 * time.Second}
	res, err := cl.Fetch(ctx, &kafka.FetchRequest{Topic: w.svc.Log.Topic(), Partition: info.Partition, Offset: 0, MaxBytes: 8 << 20})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch: %v %v", err, res.Error)
	}
	var found *kafka.Record
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			break
		}
		c := clone(r)
		if header(c, kafkalog.HeaderStream) == name && header(c, kafkalog.HeaderRec) == strconv.FormatInt(rec, 10) {
			found = &c // the latest generation's is the last
		}
	}
	if found == nil {
		t.Fatalf("no record %d of %s in partition %d", rec, name, info.Partition)
	}
	produce(t, w.svc, info.Partition, []kafka.Record{*found})
}

// header is the value of a record's header key.
func header(r kafka.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// buildLate makes through the service every case of the log's fold that
// kafkalog's TestReplayMatchesService makes, with the same outcomes: each
// leaves in Kafka records the fold ignores (copies, late records whose
// number was passed) or refuses (late appends and closes), which the
// recipes must not print. want is what the API reads of each.
func buildLate(t *testing.T, w *writer) []stream {
	t.Helper()
	ctx := context.Background()
	cl := w.svc.Broker.Cluster()
	const tp = textPlain
	app := func(name, body string, h http.Header) func() int {
		return func() int { return w.post(name, h, body) }
	}
	// A producer's new data is answered 200, its duplicate 204 (§5.2.1);
	// an append without producer headers 204.
	expect := func(what string, got, want int) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %d, want %d", what, got, want)
		}
	}
	for _, n := range []string{"late/lost", "late/after", "late/before", "late/closed", "late/epoch", "late/seq"} {
		w.create(n, tp, "")
	}

	// A write whose answer is lost (it lands; the broker answers an
	// error): the service re-reads Kafka and takes it; the retry is a
	// duplicate.
	f := cl.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: w.svc.Log.Topic(), Err: kerr.RequestTimedOut, Count: 1})
	expect("l0; whose answer is lost", app("late/lost", "l0;", producer("p", 0, 0))(), http.StatusServiceUnavailable)
	f.Remove()
	expect("retry of l0;", w.settle(app("late/lost", "l0;", producer("p", 0, 0))), http.StatusNoContent)

	// A record landing after its retry: its number was passed (a copy).
	expect("a;", app("late/after", "a;", producer("p", 0, 0))(), http.StatusOK)
	land := w.hold(app("late/after", "b;", producer("p", 0, 1)))
	expect("retry of b;", app("late/after", "b;", producer("p", 0, 1))(), http.StatusOK)
	land()
	expect("c; behind the late b;", w.settle(app("late/after", "c;", producer("p", 0, 2))), http.StatusNoContent)

	// A record landing before its retry: the retry lands too, and is
	// refused as a duplicate producer seq.
	expect("a;", app("late/before", "a;", producer("p", 0, 0))(), http.StatusOK)
	land = w.hold(app("late/before", "b;", producer("p", 0, 1)))
	w.barrier("late/before")
	land()
	expect("retry of b; behind the late b;", w.settle(app("late/before", "b;", producer("p", 0, 1))), http.StatusNoContent)

	// A close landing late: the append decided before the service knew of
	// it lands after it and is refused.
	expect("x;", app("late/closed", "x;", nil)(), http.StatusNoContent)
	land = w.hold(app("late/closed", "", http.Header{"Stream-Closed": {"true"}}))
	w.barrier("late/closed")
	land()
	expect("y; behind the late close", w.settle(app("late/closed", "y;", nil)), http.StatusConflict)

	// A new producer epoch landing late fences the zombie's append.
	expect("0;", app("late/epoch", "0;", producer("z", 0, 0))(), http.StatusOK)
	land = w.hold(app("late/epoch", "1;", producer("z", 1, 0)))
	w.barrier("late/epoch")
	land()
	expect("the zombie's z; behind the late epoch", w.settle(app("late/epoch", "z;", producer("z", 0, 1))), http.StatusForbidden)

	// A higher Stream-Seq landing late refuses the lower one decided after.
	expect("1;", app("late/seq", "1;", http.Header{"Stream-Seq": {"001"}})(), http.StatusNoContent)
	land = w.hold(app("late/seq", "3;", http.Header{"Stream-Seq": {"003"}}))
	w.barrier("late/seq")
	land()
	expect("Stream-Seq 002 behind the late 003", w.settle(app("late/seq", "2;", http.Header{"Stream-Seq": {"002"}})), http.StatusConflict)

	// A create landing after its retry created the next generation (the
	// failed create burnt generation 1).
	createGen := func() int {
		_, created, err := w.c.Create(ctx, "late/gen", client.CreateOptions{ContentType: tp})
		if err != nil {
			return client.StatusCode(err)
		}
		if created {
			return http.StatusCreated
		}
		return http.StatusOK
	}
	land = w.hold(createGen)
	expect("retry of the create", w.settle(createGen), http.StatusCreated)
	land()
	expect("g; behind the late create", w.settle(app("late/gen", "g;", producer("g", 0, 0))), http.StatusNoContent)

	// A fork whose create lands after its source was soft-deleted (another
	// fork still inherits from it): the fork inherits from the deleted
	// source all the same.
	w.create("late/src", tp, "s0;")
	if _, err := w.c.Fork(ctx, "late/src/f1", "late/src", client.ForkOptions{}); err != nil {
		t.Fatal(err)
	}
	land = w.hold(func() int {
		_, err := w.c.Fork(ctx, "late/src/f2", "late/src", client.ForkOptions{})
		return client.StatusCode(err)
	})
	if err := w.c.Delete(ctx, "late/src"); err != nil { // decided after the re-read
		t.Fatal(err)
	}
	land()
	expect("f1; behind the late fork", w.settle(app("late/src/f1", "f1;", producer("f", 0, 0))), http.StatusNoContent)
	w.appendAll("late/src/f2", tp, "f2;")

	// Copies of records (what an earlier version's kafka-go Writer
	// retries left, or another tool): a copy of a stream's latest record
	// moves its entry to the copy (the create's too: "dup" in build has an
	// append's), a copy of an older record is ignored. The appends after
	// them land behind them.
	w.create("copy/old", tp, "o0;")
	w.appendAll("copy/old", tp, "o1;", "o2;")
	w.copyRec("copy/old", 0)
	w.copyRec("copy/old", 1)
	w.appendAll("copy/old", tp, "o3;")
	w.create("copy/create", tp, "c0;")
	w.copyRec("copy/create", 0)
	w.appendAll("copy/create", tp, "c1;")
	w.copyRec("late/after", 1)
	expect("s; behind the copy of a;", w.settle(app("late/after", "s;", producer("s", 0, 0))), http.StatusNoContent)

	var out []stream
	for _, s := range []struct{ name, want string }{
		{"late/lost", "l0;"},
		{"late/after", "a;b;c;s;"},
		{"late/before", "a;b;"},
		{"late/closed", "x;"},
		{"late/epoch", "0;1;"},
		{"late/seq", "1;3;"},
		{"late/gen", "g;"},
		{"late/src/f1", "s0;f1;"},
		{"late/src/f2", "s0;f2;"},
		{"copy/old", "o0;o1;o2;o3;"},
		{"copy/create", "c0;c1;"},
	} {
		out = append(out, stream{name: s.name, want: s.want})
	}
	return out
}
