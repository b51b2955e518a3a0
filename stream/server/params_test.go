package server

import (
	"net/http"
	"strings"
	"testing"
)

// A producer header sent twice is refused rather than read as its first
// value.
func TestRepeatedProducerHeaders(t *testing.T) {
	h := http.Header{}
	h.Set("Producer-Id", "p")
	h.Add("Producer-Epoch", "0")
	h.Add("Producer-Epoch", "5")
	h.Set("Producer-Seq", "0")
	if _, err := parseProducer(h); err == nil || !strings.Contains(err.Error(), "Producer-Epoch is repeated") {
		t.Fatalf("got %v, want a refusal of the repeated Producer-Epoch", err)
	}
	h.Del("Producer-Epoch")
	h.Set("Producer-Epoch", "5")
	if p, err := parseProducer(h); err != nil || p.epoch != 5 {
		t.Fatalf("single headers: %+v, %v", p, err)
	}
}
