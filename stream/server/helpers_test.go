package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/server"
	"github.com/forklab/forklab/stream/service"
)

func start(t *testing.T, dir string, mod func(*service.Config)) *service.Service {
	t.Helper()
	cfg := service.Config{
		Addr: "127.0.0.1:0", DataDir: dir, NoSync: true,
		Log:    kafkalog.Config{Logf: func(string, ...any) {}},
		Server: server.Config{LongPollTimeout: 300 * time.Millisecond},
	}
	if mod != nil {
		mod(&cfg)
	}
	svc, err := service.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return svc
}

func stop(svc *service.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	svc.Close(ctx)
}

type resp struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, method, url string, h map[string]string, body string) resp {
	t.Helper()
	hh := http.Header{}
	for k, v := range h {
		hh[http.CanonicalHeaderKey(k)] = []string{v}
	}
	return doHeader(t, method, url, hh, body)
}

// doHeader is do with a full header: a name may carry several values,
// each sent as its own field line; a Host entry is the request's Host.
func doHeader(t *testing.T, method, url string, h http.Header, body string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if host := h.Get("Host"); host != "" {
		req.Host = host // the client sends req.Host, not a Host field
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	return resp{res.StatusCode, res.Header, string(b)}
}

// highWatermark is the data topic's high watermark: any write moves it.
func highWatermark(t *testing.T, svc *service.Service) int64 {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(svc.Brokers...)}
	res, err := cl.ListOffsets(context.Background(), &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{
		svc.Log.Topic(): {kafka.LastOffsetOf(0)}}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Topics[svc.Log.Topic()][0].LastOffset
}
