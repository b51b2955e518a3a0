package broker

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// SyncPartition makes every record the broker has acknowledged in
// partition part of topic durable: it fdatasyncs the partition's segment
// files that grew since the last call, and the partition's directory when a
// segment file appeared (a new segment's name must survive a crash too).
// The session log calls it after each produce and before it answers the
// appends the produce carried. It is a no-op with Config.NoSync or
// Config.KfakeSync.
//
// The files are kfake's: DATA/kafka/partitions/TOPIC-PART/BASE.dat, one per
// segment, rebuilt from on load (kfake's index files only cache metadata it
// recomputes). A partition without any segment file is an error, so that a
// change of kfake's layout fails loudly instead of leaving appends unsynced.
func (b *Broker) SyncPartition(topic string, part int32) error {
	if !b.sync {
		return nil
	}
	return b.partSegments(topic, part).sync()
}

// syncPartitionFiles is SyncPartition for any number of batches since the
// last call: every segment file of the partition that grew is synced (not
// only the newest: kfake may have rolled meanwhile), and the directory when
// a segment appeared.
func (b *Broker) syncPartitionFiles(topic string, part int32) error {
	if !b.sync {
		return nil
	}
	return b.partSegments(topic, part).scan()
}

func (b *Broker) partSegments(topic string, part int32) *segments {
	dir := filepath.Join(b.dir, "partitions", fmt.Sprintf("%s-%d", url.PathEscape(topic), part))
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.parts[dir]
	if s == nil {
		s = &segments{dir: dir, files: map[string]*segment{}}
		b.parts[dir] = s
	}
	return s
}

// segments is the sync state of one partition directory. Calls for one
// partition come from one goroutine.
type segments struct {
	dir    string
	files  map[string]*segment // by file name
	active *segment            // the newest segment, the one kfake appends to
}

type segment struct {
	f      *os.File
	synced int64 // size at the last sync
}

// sync syncs the active segment when it grew since the last call: the
// batch just produced went there. When it did not, kfake rolled to a new
// segment (or the layout is not what forklab knows): every segment that
// grew is synced, and the directory when a segment appeared.
func (s *segments) sync() error {
	if s.active != nil {
		var st syscall.Stat_t
		if err := syscall.Fstat(int(s.active.f.Fd()), &st); err == nil && st.Size > s.active.synced {
			if err := fdatasync(s.active.f); err != nil {
				return fmt.Errorf("sync %s: %w", s.dir, err)
			}
			s.active.synced = st.Size
			return nil
		}
	}
	return s.scan()
}

// scan syncs every segment that grew since its last sync, and the
// directory when a segment appeared.
func (s *segments) scan() error {
	ents, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		ents, err = nil, nil // no segment files: the error below
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", s.dir, err)
	}
	seen := map[string]bool{}
	added := false
	activeName := ""
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".dat") || !e.Type().IsRegular() {
			continue
		}
		seen[name] = true
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by retention meanwhile
		}
		if err != nil {
			return fmt.Errorf("sync %s: %w", name, err)
		}
		seg := s.files[name]
		if seg == nil {
			f, err := os.Open(filepath.Join(s.dir, name))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sync %s: %w", name, err)
			}
			seg = &segment{f: f, synced: -1}
			s.files[name] = seg
			added = true
		}
		if base(name) > base(activeName) {
			activeName = name
		}
		if info.Size() == seg.synced {
			continue
		}
		if err := fdatasync(seg.f); err != nil {
			return fmt.Errorf("sync %s: %w", filepath.Join(s.dir, name), err)
		}
		seg.synced = info.Size()
	}
	s.active = s.files[activeName]
	if len(seen) == 0 {
		return fmt.Errorf("sync %s: no segment files (*.dat): the embedded broker does not keep its data where forklab syncs it", s.dir)
	}
	for name, seg := range s.files {
		if !seen[name] {
			seg.f.Close()
			delete(s.files, name)
		}
	}
	if added {
		return syncDir(s.dir)
	}
	return nil
}

func (s *segments) close() {
	for _, seg := range s.files {
		seg.f.Close()
	}
}

// base is the base offset a segment file is named after; -1 for none.
func base(name string) int64 {
	n, err := strconv.ParseInt(strings.TrimSuffix(name, ".dat"), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// fdatasync flushes a file's data and the metadata needed to read it back
// (its size), not its timestamps.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// syncTree fsyncs every file and directory under dir.
func syncTree(dir string) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil
		}
		f, err := os.Open(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		defer f.Close()
		return f.Sync()
	})
}
