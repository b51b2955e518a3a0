package service_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/service"
)

// TestStalledReaders measures what SSE readers that never read do to
// appends to another stream (docs/session-log.md, "Readers and writers"):
// a 3 MB text stream of 1,000-byte records, a restart (the read cache is
// cold), FORKLAB_STALL readers opening it with offset=-1 and live=sse
// from one address without reading, and one append every 100 ms to
// another stream for 20 s; it prints the appends' p50, p99 and maximum.
// FORKLAB_STALL_WARM=1 skips the restart. A measurement, not a test: the
// structural property is kafkalog's TestColdReadersBoundFetches.
func TestStalledReaders(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FORKLAB_STALL"))
	if n <= 0 {
		t.Skip("a measurement: FORKLAB_STALL=READERS (e.g. 200)")
	}
	dir := t.TempDir()
	start := func() *service.Service {
		svc, err := service.Start(context.Background(), service.Config{Addr: "127.0.0.1:0", DataDir: dir,
			Log: kafkalog.Config{Logf: func(string, ...any) {}}})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	svc := start()
	post := func(url, body string) (int, error) {
		res, err := http.Post(url, "text/plain", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
	for _, name := range []string{"big", "other"} {
		req, _ := http.NewRequest("PUT", svc.URL+"/v1/stream/"+name, nil)
		req.Header.Set("Content-Type", "text/plain")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
	}
	rec := strings.Repeat("x", 999) + "\n"
	var wg sync.WaitGroup
	for w := 0; w < 32; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 3000; i += 32 {
				if st, err := post(svc.URL+"/v1/stream/big", rec); err != nil || st != http.StatusNoContent {
					t.Errorf("fill: %d %v", st, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if os.Getenv("FORKLAB_STALL_WARM") == "" {
		svc.Close(context.Background())
		svc = start()
	}
	defer svc.Close(context.Background())
	u, _ := url.Parse(svc.URL)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "GET /v1/stream/big?offset=-1&live=sse HTTP/1.1\r\nHost: %s\r\n\r\n", u.Host)
	}
	var lat []time.Duration
	failed := 0
	for t0 := time.Now(); time.Since(t0) < 20*time.Second; time.Sleep(100 * time.Millisecond) {
		a := time.Now()
		if st, err := post(svc.URL+"/v1/stream/other", "hello\n"); err != nil || st != http.StatusNoContent {
			failed++
		}
		lat = append(lat, time.Since(a))
	}
	slices.Sort(lat)
	fmt.Printf("%d stalled SSE readers: %d appends, %d not 204, p50 %v p99 %v max %v\n", n, len(lat), failed,
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
}
