package scaleout

import "github.com/segmentio/kafka-go"

// Fetcher is the reader a member fetches units with.
type Fetcher = fetcher

// WrapReaders makes w's members fetch through wrap(the real reader):
// tests inject the errors a consumer group meets.
func WrapReaders(w *Worker, wrap func(Fetcher) Fetcher) {
	inner := w.newReader
	w.newReader = func(rc kafka.ReaderConfig) fetcher { return wrap(inner(rc)) }
}

// SetStepHook runs hook after each step of every unit w runs.
func SetStepHook(w *Worker, hook func(Step)) { w.stepHook = hook }

// ProduceRetries counts the writes w retried.
func ProduceRetries(w *Worker) int64 { return w.conn.retries.Load() }
