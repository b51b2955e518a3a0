// Package brokertest is for tests: faults injected into the embedded
// broker's kfake cluster, shared by the log's tests (stream/kafkalog) and
// the service's (stream/server).
package brokertest

import (
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// HoldFirstProduce makes cluster c hold the first produce request it gets
// until release is closed (held is closed once it holds it) and pass every
// later request on untouched: a produce that lands late. The held request
// is then handled normally: applied and answered late.
func HoldFirstProduce(c *kfake.Cluster) (release, held chan struct{}) {
	release, held = make(chan struct{}), make(chan struct{})
	var once sync.Once
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			c.SleepControl(func() { <-release })
		} else {
			c.DropControl()
		}
		return nil, nil, false
	})
	return release, held
}
