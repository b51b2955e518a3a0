package sink

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/forklab/forklab/schemas"
	"github.com/forklab/forklab/stream/kafkalog"
	"github.com/parquet-go/parquet-go"
)

// Contents is a sink directory read back: every stream generation's events
// in the order of the log.
type Contents struct {
	// Files is how many Parquet files the directory holds.
	Files int
	// Streams maps each stream generation to its events, in index order.
	Streams map[kafkalog.StreamRef][]schemas.SessionEvent
	// Problems lists what breaks the sink's promises, one line each:
	// files of one partition whose offset ranges overlap, an event index
	// found twice or missing, a stream's events out of offset order.
	Problems []string
}

// Latest returns the events of the newest generation of stream name in c.
func (c *Contents) Latest(name string) []schemas.SessionEvent {
	var gen int64
	for ref := range c.Streams {
		if ref.Name == name && ref.Gen > gen {
			gen = ref.Gen
		}
	}
	return c.Streams[kafkalog.StreamRef{Name: name, Gen: gen}]
}

// ReadDir reads every file under out/sink back and checks it: the batches
// of a partition tile its offsets without overlap (a batch's files of
// different dates share one name), and each stream generation's events
// have the indexes 0, 1, 2, … once each, in offset order. A stream whose
// records retention removed before the sink read them (a reported gap)
// shows as missing indexes here too.
func ReadDir(out string) (*Contents, error) {
	root := filepath.Join(out, Dir)
	paths, err := filepath.Glob(filepath.Join(root, DatePrefix+"*", "*.parquet"))
	if err != nil {
		return nil, err
	}
	type file struct {
		path        string
		topic       string
		part        int32
		first, last int64
	}
	var files []file
	for _, p := range paths {
		topic, part, a, b, ok := ParseFileName(filepath.Base(p))
		if !ok {
			continue
		}
		files = append(files, file{p, topic, part, a, b})
	}
	sort.Slice(files, func(i, j int) bool {
		a, b := files[i], files[j]
		if a.topic != b.topic || a.part != b.part {
			return a.topic < b.topic || a.topic == b.topic && a.part < b.part
		}
		return a.first < b.first || a.first == b.first && a.path < b.path
	})
	c := &Contents{Files: len(files), Streams: map[kafkalog.StreamRef][]schemas.SessionEvent{}}
	for i := 0; i < len(files); {
		j := i
		var batch []schemas.SessionEvent
		for ; j < len(files) && files[j].topic == files[i].topic && files[j].part == files[i].part && files[j].first == files[i].first; j++ {
			if files[j].last != files[i].last {
				c.Problems = append(c.Problems, fmt.Sprintf("%s and %s start at the same offset and end at different ones", files[i].path, files[j].path))
			}
			rows, err := parquet.ReadFile[schemas.SessionEvent](files[j].path)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", files[j].path, err)
			}
			batch = append(batch, rows...)
		}
		if j < len(files) && files[j].topic == files[i].topic && files[j].part == files[i].part && files[j].first <= files[i].last {
			c.Problems = append(c.Problems, fmt.Sprintf("%s overlaps %s", files[j].path, files[i].path))
		}
		// A batch's rows of one stream, from its date files, in index
		// order.
		per := map[kafkalog.StreamRef][]schemas.SessionEvent{}
		var order []kafkalog.StreamRef
		for _, r := range batch {
			var gen int64
			if r.Generation != nil {
				gen = *r.Generation
			}
			ref := kafkalog.StreamRef{Name: r.Stream, Gen: gen}
			if _, ok := per[ref]; !ok {
				order = append(order, ref)
			}
			per[ref] = append(per[ref], r)
		}
		for _, ref := range order {
			rs := per[ref]
			sort.SliceStable(rs, func(a, b int) bool { return rs[a].Index < rs[b].Index })
			c.Streams[ref] = append(c.Streams[ref], rs...)
		}
		i = j
	}
	for ref, rs := range c.Streams {
		for i, r := range rs {
			switch {
			case int(r.Index) != i:
				c.Problems = append(c.Problems, fmt.Sprintf("%s (generation %d): event %d has index %d", ref.Name, ref.Gen, i, r.Index))
			case i > 0 && r.KafkaOffset != nil && rs[i-1].KafkaOffset != nil && *r.KafkaOffset < *rs[i-1].KafkaOffset:
				c.Problems = append(c.Problems, fmt.Sprintf("%s (generation %d): event %d at offset %d comes after offset %d", ref.Name, ref.Gen, i, *r.KafkaOffset, *rs[i-1].KafkaOffset))
			default:
				continue
			}
			break
		}
	}
	sort.Strings(c.Problems)
	return c, nil
}

// Progress returns the committed offset of every partition of topic that
// the sink in out has committed: every record below it is in files.
func Progress(out, topic string) (map[int32]int64, error) {
	paths, err := filepath.Glob(filepath.Join(out, Dir, StateDir, topic+"+*.json"))
	if err != nil {
		return nil, err
	}
	pos := map[int32]int64{}
	for _, p := range paths {
		if strings.HasPrefix(filepath.Base(p), ".") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var st struct {
			Partition int32 `json:"partition"`
			Next      int64 `json:"next_offset"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		pos[st.Partition] = st.Next
	}
	return pos, nil
}
