// Package replay_test checks the replay recipes of the session log's
// README and docs/session-log.md: kcat piped into replay.jq, and the kafkajs
// script replay.mjs, against every kind of stream the HTTP API can make.
// Each recipe must print exactly what the API reads, from the beginning and
// from every offset the API issued.
package replay_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

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
	binary  bool // not UTF-8: the kcat recipe (jq decodes text) is not exact
	offsets []string
}

// TestReplayRecipes builds streams of every kind through the API (text with
// newlines and tabs, JSON with flattened arrays, re-created generations,
// forks at offsets and sub-offsets, forks of forks, closed, binary, a
// record Kafka holds twice), then replays each with both recipes.
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
	streams := build(t, svc)
	// The replay must match a service that rebuilt its state from Kafka
	// too (the copied record of "dup" is only seen by a rebuild).
	svc.Close(context.Background())
	svc = startSvc()
	defer svc.Close(context.Background())
	for i := range streams {
		streams[i].offsets = issued(t, svc, streams[i].name)
	}

	ctx := context.Background()
	c := client.New(svc.URL)
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
			if j.st.binary {
				return
			}
			var got []byte
			var err error
			if j.from == client.Start {
				got, err = kcatReplay(svc, j.part, j.st.name, j.from)
			} else {
				got, err = jqReplay(records[j.part], j.st.name, j.from)
			}
			if err != nil {
				t.Errorf("kcat recipe, %s from %s: %v", j.st.name, j.from, err)
				return
			}
			same(t, "kcat recipe", j.st, j.from, got, j.want)
		})
	}
	if useJS {
		// kafkajs joins a consumer group per run (a second or two): run
		// every stream from the beginning and the first three from their
		// second offset, four at a time.
		var some []job
		for _, j := range jobs {
			if j.from == client.Start || (len(j.st.offsets) > 1 && j.from == j.st.offsets[1] &&
				slices.ContainsFunc(streams[:3], func(o stream) bool { return o.name == j.st.name })) {
				some = append(some, j)
			}
		}
		parallel(t, some, 4, func(j job) {
			got, err := jsReplay(svc, j.part, j.st.name, j.from)
			if err != nil {
				t.Errorf("kafkajs recipe, %s from %s: %v", j.st.name, j.from, err)
				return
			}
			same(t, "kafkajs recipe", j.st, j.from, got, j.want)
		})
	}

	// A deleted stream is not replayed: both recipes fail and print nothing.
	if err := c.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	for _, part := range []int{0, 1} {
		if useKcat {
			if out, err := kcatReplay(svc, part, "gone", client.Start); err == nil || len(out) > 0 {
				t.Fatalf("kcat recipe of a deleted stream: %q %v, want an error and no output", out, err)
			}
		}
	}
	if useJS {
		if out, err := jsReplay(svc, 0, "gone", client.Start); err == nil || len(out) > 0 {
			t.Fatalf("kafkajs recipe of a deleted stream: %q %v, want an error and no output", out, err)
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
		return out, fmt.Errorf("%v: %s", err, stderr.String())
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
		return out, fmt.Errorf("%v: %s", err, stderr.String())
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
		return out, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return out, nil
}

// build makes the streams through the API and returns them with the
// offsets the API issued for each.
func build(t *testing.T, svc *service.Service) []stream {
	t.Helper()
	ctx := context.Background()
	c := client.New(svc.URL)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	var out []stream
	track := func(st stream) { out = append(out, st) }
	producers := 0
	appendAll := func(name, ct string, bodies ...string) []string {
		var next []string
		for _, b := range bodies {
			producers++ // a producer of its own for each append: seq 0
			r, err := c.NewAppender(name, "p-"+strconv.Itoa(producers), 0, ct).Append(ctx, []byte(b))
			must(err)
			next = append(next, r.Next)
		}
		return next
	}
	create := func(name, ct, body string) string {
		info, _, err := c.Create(ctx, name, client.CreateOptions{ContentType: ct, Data: []byte(body)})
		must(err)
		return info.Tail
	}

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
	copyLast(t, svc, "dup")
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

// copyLast writes the last record of stream name to Kafka again, headers
// and all, as a retried produce whose first attempt landed would.
func copyLast(t *testing.T, svc *service.Service, name string) {
	t.Helper()
	ctx := context.Background()
	info, err := client.New(svc.URL).Head(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cl := &kafka.Client{Addr: kafka.TCP(svc.Brokers...), Timeout: 10 * time.Second}
	res, err := cl.Fetch(ctx, &kafka.FetchRequest{Topic: svc.Log.Topic(), Partition: info.Partition, Offset: 0, MaxBytes: 8 << 20})
	if err != nil || res.Error != nil {
		t.Fatalf("fetch: %v %v", err, res.Error)
	}
	var last kafka.Message
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			break
		}
		key, _ := readAll(r.Key)
		if string(key) != name {
			continue
		}
		val, _ := readAll(r.Value)
		last = kafka.Message{Key: key, Value: val, Headers: r.Headers}
	}
	w := &kafka.Writer{Addr: kafka.TCP(svc.Brokers...), Topic: svc.Log.Topic(), Balancer: fixed(info.Partition),
		RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond}
	defer w.Close()
	if err := w.WriteMessages(ctx, last); err != nil {
		t.Fatal(err)
	}
}

type fixed int

func (f fixed) Balance(kafka.Message, ...int) int { return int(f) }

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
