package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/forklab/forklab/stream/service"
)

// forge produces one record to partition part of topic on the service's
// broker, as the kcat -P did, with a kafka-go client of its own
// (no credentials) and acks=all; it returns the produce's error.
func forge(svc *service.Service, topic string, part int, key, value string, headers ...string) error {
	var hs []kafka.Header
	for i := 0; i+1 < len(headers); i += 2 {
		hs = append(hs, kafka.Header{Key: headers[i], Value: []byte(headers[i+1])})
	}
	cl := &kafka.Client{Addr: kafka.TCP(svc.Brokers...), Timeout: 5 * time.Second}
	res, err := cl.Produce(context.Background(), &kafka.ProduceRequest{Topic: topic, Partition: part, RequiredAcks: kafka.RequireAll,
		Records: kafka.NewRecordReader(kafka.Record{Key: kafka.NewBytes([]byte(key)), Value: kafka.NewBytes([]byte(value)), Headers: hs})})
	if err == nil && res.Error != nil {
		err = res.Error
	}
	return err
}

// TestForeignRecords: records someone else produced to the log's Kafka
// topic are never served and never break the next append, live, after a
// restart from the snapshot and after a full rebuild, with the embedded
// broker syncing through its journal or not. The kcat record
// (forklab-op=append, forklab-stream=z1) made the next real append 503
// and lost it; a forged record of a newer generation would have deleted
// the stream, and a forged delete would have too.
func TestForeignRecords(t *testing.T) {
	for _, synced := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", synced), func(t *testing.T) {
			dir := t.TempDir()
			var logged []string
			var mu sync.Mutex
			mod := func(c *service.Config) {
				c.NoSync = !synced
				c.Log.Logf = func(f string, a ...any) {
					mu.Lock()
					logged = append(logged, fmt.Sprintf(f, a...))
					mu.Unlock()
				}
			}
			svc := start(t, dir, mod)
			u := svc.URL + "/v1/stream/z1"
			tp := map[string]string{"Content-Type": "text/plain"}
			if r := do(t, "PUT", u, tp, "a"); r.status != 201 {
				t.Fatalf("create: %d %s", r.status, r.body)
			}
			want := "a"
			topic := svc.Log.Topic()
			forgeries := []struct {
				name    string
				headers []string
			}{
				{"the issue's kcat headers", []string{"forklab-op", "append", "forklab-stream", "z1"}},
				{"a whole append, with the next record number", []string{"forklab-op", "append", "forklab-stream", "z1", "forklab-gen", "1", "forklab-rec", "1", "content-type", "text/plain"}},
				{"a newer generation", []string{"forklab-op", "create", "forklab-stream", "z1", "forklab-gen", "2", "forklab-rec", "0", "content-type", "text/plain"}},
				{"a delete", []string{"forklab-op", "delete", "forklab-stream", "z1", "forklab-gen", "1", "forklab-rec", "1", "content-type", "text/plain"}},
				{"a producer taking the next epoch", []string{"forklab-op", "append", "forklab-stream", "z1", "forklab-gen", "1", "forklab-rec", "1", "content-type", "text/plain", "producer-id", "w", "producer-epoch", "9", "producer-seq", "0"}},
				{"a MAC that is not right", []string{"forklab-op", "append", "forklab-stream", "z1", "forklab-gen", "1", "forklab-rec", "1", "content-type", "text/plain", kafkalog.HeaderMAC, strings.Repeat("0", 32)}},
			}
			for i, f := range forgeries {
				if err := forge(svc, topic, 0, "z1", "FORGED", f.headers...); err != nil {
					t.Fatalf("%s: produce: %v", f.name, err)
				}
				if r := do(t, "GET", u+"?offset=-1", nil, ""); r.status != 200 || r.body != want {
					t.Fatalf("after %s: read %d %q, want 200 %q", f.name, r.status, r.body, want)
				}
				// The next real append is acknowledged and stored.
				next := fmt.Sprint(i)
				if r := do(t, "POST", u, map[string]string{"Content-Type": "text/plain", "Producer-Id": "w", "Producer-Epoch": "0", "Producer-Seq": next}, next); r.status != 200 {
					t.Fatalf("append after %s: %d %q, want 200", f.name, r.status, r.body)
				}
				want += next
				if r := do(t, "GET", u+"?offset=-1", nil, ""); r.status != 200 || r.body != want {
					t.Fatalf("after the append behind %s: read %d %q, want %q", f.name, r.status, r.body, want)
				}
			}
			// The producer's fencing is what the service decided: the
			// forged epoch 9 did not fence epoch 0.
			if r := do(t, "POST", u, map[string]string{"Content-Type": "text/plain", "Producer-Id": "w", "Producer-Epoch": "0", "Producer-Seq": "6"}, "6"); r.status != 200 {
				t.Fatalf("append at epoch 0 after the forged epoch 9: %d %q, want 200", r.status, r.body)
			}
			want += "6"
			mu.Lock()
			skipped := 0
			for _, l := range logged {
				if strings.Contains(l, "that this log did not write (no valid forklab-mac header)") {
					skipped++
				}
			}
			mu.Unlock()
			if skipped != len(forgeries) {
				t.Errorf("logged %d lines about skipped records, want %d: %q", skipped, len(forgeries), logged)
			}
			// Forged snapshot records are not state: garbage under the
			// manifest key, after the manifest written on close, is what
			// the next start would read last.
			stop(svc)
			svc = start(t, dir, func(c *service.Config) { mod(c); c.Log.NoSnapshotOnClose = true })
			if err := forge(svc, topic+".snapshots", 0, "0", "{not a manifest"); err != nil {
				t.Fatal(err)
			}
			stop(svc)
			svc = start(t, dir, mod)
			u = svc.URL + "/v1/stream/z1"
			if r := do(t, "GET", u+"?offset=-1", nil, ""); r.status != 200 || r.body != want {
				t.Fatalf("after a restart: read %d %q, want %q", r.status, r.body, want)
			}
			if ri := svc.Log.Restored()[0]; !ri.FromSnapshot || ri.Replayed != 0 {
				t.Errorf("restart: %+v, want the snapshot written on close, nothing replayed (the forged manifest skipped)", ri)
			}
			stop(svc)
			// A full rebuild from the data topic skips them too.
			svc = start(t, dir, func(c *service.Config) { mod(c); c.Log.SnapshotRecords = -1 })
			defer stop(svc)
			u = svc.URL + "/v1/stream/z1"
			if r := do(t, "GET", u+"?offset=-1", nil, ""); r.status != 200 || r.body != want {
				t.Fatalf("after a rebuild: read %d %q, want %q", r.status, r.body, want)
			}
			if r := do(t, "POST", u, map[string]string{"Content-Type": "text/plain", "Producer-Id": "w", "Producer-Epoch": "0", "Producer-Seq": "6"}, "6"); r.status != 204 {
				t.Fatalf("the last append again after the rebuild: %d %q, want 204 (a duplicate)", r.status, r.body)
			}
			if r := do(t, "GET", u+"?offset=-1", nil, ""); r.body != want {
				t.Fatalf("after the duplicate: %q, want %q", r.body, want)
			}
		})
	}
}

// TestRecordKeyUpgrade: records a log wrote before it had a record key (an
// earlier forklab, or a key file removed) are trusted as they are: the
// key file made on the next start says from which offset records must
// carry a MAC. Nothing is lost; what is appended then is authenticated.
func TestRecordKeyUpgrade(t *testing.T) {
	dir := t.TempDir()
	svc := start(t, dir, nil)
	u := svc.URL + "/v1/stream/old"
	tp := map[string]string{"Content-Type": "text/plain"}
	do(t, "PUT", u, tp, "a")
	do(t, "POST", u, tp, "b")
	stop(svc)
	key := filepath.Join(dir, service.RecordKeyName)
	fi, err := os.Stat(key)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record key: %v, mode %v, want 0600", err, fi.Mode())
	}
	old, _ := os.ReadFile(key)
	os.Remove(key)
	svc = start(t, dir, func(c *service.Config) { c.Log.SnapshotRecords = -1 })
	u = svc.URL + "/v1/stream/old"
	if r := do(t, "GET", u+"?offset=-1", nil, ""); r.body != "ab" {
		t.Fatalf("after a new key: %q, want \"ab\"", r.body)
	}
	do(t, "POST", u, tp, "c")
	stop(svc)
	now, _ := os.ReadFile(key)
	if string(now) == string(old) || !strings.Contains(string(now), `"authenticated_from": [`+"\n"+`        2`) {
		t.Fatalf("the new key file: %s\nwant a new key, authenticated from offset 2 (after the create and the append)", now)
	}
	svc = start(t, dir, func(c *service.Config) { c.Log.SnapshotRecords = -1 })
	u = svc.URL + "/v1/stream/old"
	if r := do(t, "GET", u+"?offset=-1", nil, ""); r.body != "abc" {
		t.Fatalf("after a restart: %q, want \"abc\"", r.body)
	}
	// A damaged key file stops the start with what to do.
	stop(svc)
	os.WriteFile(key, []byte("{"), 0o600)
	if _, err := service.Start(context.Background(), service.Config{Addr: "127.0.0.1:0", DataDir: dir, NoSync: true}); err == nil || !strings.Contains(err.Error(), "remove it to start a new key") {
		t.Fatalf("damaged key file: %v, want an error saying what to do", err)
	}
}

// TestKafkaPortClosedWithTokens: with tokens, the embedded broker takes no
// produce (nor any other request) from a client without the service's
// credentials, and the service works; --kafka-unauthenticated opens it,
// and what is forged there is still not served.
func TestKafkaPortClosedWithTokens(t *testing.T) {
	dir := t.TempDir()
	tf := filepath.Join(dir, "tokens")
	os.WriteFile(tf, []byte("read-write "+rwToken+"\n"), 0o600)
	auth := map[string]string{"Authorization": "Bearer " + rwToken, "Content-Type": "text/plain"}
	for _, open := range []bool{false, true} {
		svc := start(t, filepath.Join(dir, fmt.Sprint(open)), func(c *service.Config) { c.TokenFile = tf; c.KafkaUnauthenticated = open })
		u := svc.URL + "/v1/stream/z1"
		if r := do(t, "PUT", u, auth, "a"); r.status != 201 {
			t.Fatalf("create: %d %q", r.status, r.body)
		}
		err := forge(svc, svc.Log.Topic(), 0, "z1", "FORGED", "forklab-op", "append", "forklab-stream", "z1", "forklab-gen", "1", "forklab-rec", "1", "content-type", "text/plain")
		if open != (err == nil) {
			t.Errorf("kafka unauthenticated %v: forged produce: %v", open, err)
		}
		if !open {
			cl := &kafka.Client{Addr: kafka.TCP(svc.Brokers...), Timeout: 5 * time.Second}
			if _, err := cl.Metadata(context.Background(), &kafka.MetadataRequest{Topics: []string{svc.Log.Topic()}}); err == nil {
				t.Errorf("metadata without credentials: answered, want refused")
			}
		}
		if r := do(t, "POST", u, auth, "b"); r.status != 204 {
			t.Fatalf("kafka unauthenticated %v: append: %d %q", open, r.status, r.body)
		}
		if r := do(t, "GET", u+"?offset=-1", auth, ""); r.body != "ab" {
			t.Fatalf("kafka unauthenticated %v: read %q, want \"ab\"", open, r.body)
		}
		stop(svc)
	}
}
