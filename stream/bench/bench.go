// Package bench is the session log's load generator. It speaks plain
// Durable Streams over HTTP, so the same load runs against forklab and
// against the reference Node server:
//
//   - Appends: N concurrent producers, one stream each, one request in
//     flight per producer, fixed-size bodies, idempotent-producer headers;
//     it reports appends per second and latency percentiles.
//   - CatchUp: a catch-up read, from offset -1, of a JSON stream of many
//     small events, following Stream-Next-Offset until up to date.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/forklab/forklab/internal/plural"
)

// Target is a server under test.
type Target struct {
	Name string
	URL  string // server URL, e.g. http://127.0.0.1:4437
}

func (t Target) stream(name string) string {
	return strings.TrimRight(t.URL, "/") + "/v1/stream/" + name
}

// AppendConfig is the append load.
type AppendConfig struct {
	Producers int           // concurrent producers, one stream each
	BodyBytes int           // bytes per append
	Duration  time.Duration // measured time
	Warmup    time.Duration // unmeasured time before it
}

// AppendResult is one target's append figures.
type AppendResult struct {
	Appends       int
	Errors        int
	Elapsed       time.Duration
	PerSecond     float64
	P50, P99, Max time.Duration
}

func newHTTP(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns * 2, MaxIdleConnsPerHost: conns * 2, IdleConnTimeout: time.Minute}}
}

// Appends runs the append load against t.
func Appends(ctx context.Context, t Target, cfg AppendConfig) (AppendResult, error) {
	hc := newHTTP(cfg.Producers)
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	body := make([]byte, cfg.BodyBytes)
	for i := range body {
		body[i] = 'a' + byte(i%26)
	}
	for i := 0; i < cfg.Producers; i++ {
		if err := put(ctx, hc, t.stream(fmt.Sprintf("bench-%s-%d", run, i)), "application/octet-stream", nil); err != nil {
			return AppendResult{}, err
		}
	}
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	start := time.Now()
	measureFrom := start.Add(cfg.Warmup)
	end := measureFrom.Add(cfg.Duration)
	var wg sync.WaitGroup
	for i := 0; i < cfg.Producers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u := t.stream(fmt.Sprintf("bench-%s-%d", run, i))
			var mine []time.Duration
			myErrs := 0
			for seq := 0; ; seq++ {
				now := time.Now()
				if now.After(end) || ctx.Err() != nil {
					break
				}
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/octet-stream")
				req.Header.Set("Producer-Id", "bench")
				req.Header.Set("Producer-Epoch", "0")
				req.Header.Set("Producer-Seq", strconv.Itoa(seq))
				res, err := hc.Do(req)
				d := time.Since(now)
				ok := err == nil && (res.StatusCode == 200 || res.StatusCode == 204)
				if res != nil {
					io.Copy(io.Discard, res.Body)
					res.Body.Close()
				}
				if !ok {
					myErrs++
					seq-- // resend the same seq
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if now.After(measureFrom) {
					mine = append(mine, d)
				}
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += myErrs
			mu.Unlock()
		}()
	}
	wg.Wait()
	r := AppendResult{Appends: len(lat), Errors: errs, Elapsed: cfg.Duration}
	if len(lat) == 0 {
		return r, fmt.Errorf("%s: no append succeeded (%s)", t.Name, plural.Count(errs, "error"))
	}
	slices.Sort(lat)
	r.PerSecond = float64(len(lat)) / cfg.Duration.Seconds()
	r.P50 = lat[len(lat)*50/100]
	r.P99 = lat[min(len(lat)-1, len(lat)*99/100)]
	r.Max = lat[len(lat)-1]
	return r, nil
}

func put(ctx context.Context, hc *http.Client, u, ct string, body []byte) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("create %s: %w", u, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 201 && res.StatusCode != 200 {
		return fmt.Errorf("create %s: %d %s", u, res.StatusCode, b)
	}
	return nil
}

// CatchUpConfig is the catch-up read.
type CatchUpConfig struct {
	Events   int // small JSON events in the stream
	PerPost  int // events per append (a JSON array is flattened, §9.1.2)
	Parallel int // appenders filling the stream
}

// CatchUpResult is one target's catch-up figures.
type CatchUpResult struct {
	Events    int
	Bytes     int64
	Requests  int
	Fill      time.Duration // time to append the events
	Read      time.Duration // time to read them all from -1
	PerSecond float64       // events read per second
}

// CatchUp fills a JSON stream with cfg.Events small events and times one
// catch-up read of all of them from offset -1.
func CatchUp(ctx context.Context, t Target, cfg CatchUpConfig) (CatchUpResult, error) {
	if cfg.PerPost <= 0 {
		cfg.PerPost = 1000
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 4
	}
	hc := newHTTP(cfg.Parallel)
	u := t.stream("catchup-" + strconv.FormatInt(time.Now().UnixNano(), 36))
	if err := put(ctx, hc, u, "application/json", nil); err != nil {
		return CatchUpResult{}, err
	}
	// Fill: batches go in order from one appender at a time per batch
	// index range, so the event order is known.
	fillStart := time.Now()
	posts := (cfg.Events + cfg.PerPost - 1) / cfg.PerPost
	for p := 0; p < posts; p++ {
		var b bytes.Buffer
		b.WriteByte('[')
		for i := p * cfg.PerPost; i < min(cfg.Events, (p+1)*cfg.PerPost); i++ {
			if i > p*cfg.PerPost {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"i":%d,"k":"tool_call","v":%d}`, i, rand.IntN(1000))
		}
		b.WriteByte(']')
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, &b)
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			return CatchUpResult{}, fmt.Errorf("fill: %w", err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 204 && res.StatusCode != 200 {
			return CatchUpResult{}, fmt.Errorf("fill: %d", res.StatusCode)
		}
	}
	r := CatchUpResult{Fill: time.Since(fillStart)}
	// Read from -1, following Stream-Next-Offset.
	var chunks [][]byte
	offset := "-1"
	start := time.Now()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u+"?offset="+url.QueryEscape(offset), nil)
		res, err := hc.Do(req)
		if err != nil {
			return r, fmt.Errorf("read: %w", err)
		}
		b, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != 200 {
			return r, fmt.Errorf("read at %s: %d %v", offset, res.StatusCode, err)
		}
		r.Requests++
		r.Bytes += int64(len(b))
		chunks = append(chunks, b)
		next := res.Header.Get("Stream-Next-Offset")
		if res.Header.Get("Stream-Up-To-Date") == "true" || next == offset {
			break
		}
		offset = next
	}
	r.Read = time.Since(start)
	// Verify outside the timing: every event once, in order.
	n := 0
	for _, c := range chunks {
		var evs []struct {
			I int `json:"i"`
		}
		if err := json.Unmarshal(c, &evs); err != nil {
			return r, fmt.Errorf("chunk is not a JSON array: %w", err)
		}
		for _, e := range evs {
			if e.I != n {
				return r, fmt.Errorf("event %d read where %d was expected", e.I, n)
			}
			n++
		}
	}
	if n != cfg.Events {
		return r, fmt.Errorf("read %d events, wrote %d", n, cfg.Events)
	}
	r.Events = n
	r.PerSecond = float64(n) / r.Read.Seconds()
	return r, nil
}
