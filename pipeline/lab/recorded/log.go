package recorded

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"mime"
	"net/url"
	"strings"

	"github.com/forklab/forklab/pipeline/lab"
	"github.com/forklab/forklab/pipeline/sessions/session"
	"github.com/forklab/forklab/stream/client"
)

// logSource is every stream under a prefix of the session log: each is a
// recorded session (forklab agent run, or an agent of a built-in world
// writing its events), folded with the session fold (package session) to
// each fork step of the sweep. Its run id is the stream's name.
type logSource struct {
	source  string
	c       *client.Client
	o       Options
	names   []string
	listing Listing
}

// ParseLogURL splits a session-log URL naming a stream prefix,
// http(s)://HOST[:PORT]/v1/stream/PREFIX, into the log's address and the
// prefix (possibly empty: every stream).
func ParseLogURL(source string) (base, prefix string, err error) {
	u, err := url.Parse(source)
	bad := func(why string) error {
		return fmt.Errorf("runs %s: %s: want http://HOST:PORT/v1/stream/PREFIX, e.g. http://127.0.0.1:4437/v1/stream/prod/ (every stream whose name begins with PREFIX is a recorded run)", source, why)
	}
	switch {
	case err != nil:
		return "", "", bad(err.Error())
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return "", "", bad("not an http or https URL with a host")
	case u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return "", "", bad("a query, fragment or user is not part of it (give a token with --token)")
	}
	p, ok := strings.CutPrefix(u.Path, "/v1/stream/")
	if !ok {
		return "", "", bad("its path does not begin with /v1/stream/")
	}
	return u.Scheme + "://" + u.Host, p, nil
}

func openLog(ctx context.Context, source string, o Options) (*logSource, error) {
	base, prefix, err := ParseLogURL(source)
	if err != nil {
		return nil, err
	}
	var opts []client.Option
	if o.Token != "" {
		opts = append(opts, client.WithToken(o.Token))
	}
	c := client.New(base, opts...)
	names, err := c.List(ctx, prefix)
	if err != nil {
		if client.StatusCode(err) == 0 {
			return nil, fmt.Errorf("runs %s: %w: %v", source, ErrUnreachable, err)
		}
		return nil, fmt.Errorf("runs %s: the log refused to list its streams: %w", source, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("runs %s: no stream's name begins with %q: the prefix holds no recorded run (forklab log read lists nothing there either; sessions are written by forklab agent run --session NAME)", source, prefix)
	}
	s := &logSource{source: source, c: c, o: o, names: names}
	crc := uint32(0)
	var n int64
	for _, name := range names {
		crc = crc32.Update(crc, castagnoli, []byte(name+"\n"))
		n += int64(len(name)) + 1
	}
	s.listing = Listing{Format: FormatLog, Runs: uint64(len(names)), Bytes: n, CRC32C: crcText(crc)}
	return s, nil
}

func (s *logSource) Listing() Listing { return s.listing }
func (s *logSource) Check() error     { return nil }
func (s *logSource) Close() error     { return nil }

// Read folds streams [lo, hi) of the listing, one after the other.
func (s *logSource) Read(ctx context.Context, lo, hi uint64) (lab.Records, func(), error) {
	if lo > hi || hi > uint64(len(s.names)) {
		return nil, nil, fmt.Errorf("runs %s: positions %d:%d are outside its %d streams", s.source, lo, hi, len(s.names))
	}
	pos := lo
	var rec lab.Record
	next := func(ctx context.Context) (*lab.Record, error) {
		if pos >= hi {
			return nil, nil
		}
		if err := s.fold(ctx, s.names[pos], &rec); err != nil {
			return nil, err
		}
		rec.Pos = pos
		pos++
		return &rec, nil
	}
	return next, func() {}, nil
}

// fold reads stream name from its beginning and folds its events until the
// run has reached the sweep's last fork step (or ended), taking the
// checkpoint at each fork step as the fold is there: the run once it has
// taken that many steps, or at its end if it ended before. A session that
// has done neither yet (still running) has an error at the steps it has
// not reached.
func (s *logSource) fold(ctx context.Context, name string, rec *lab.Record) error {
	where := "stream " + name
	*rec = lab.Record{RunID: name, Where: where, Forks: rec.Forks[:0]}
	steps := s.o.ForkAt
	var ss session.Session
	defer ss.Close()
	r := s.c.NewReader(name, client.Start, client.CatchUp)
	for len(rec.Forks) < len(steps) {
		ch, err := r.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		switch code := client.StatusCode(err); {
		case err == nil:
		case code == 404 || code == 410:
			return fmt.Errorf("runs %s %w: %s is gone (%d) since the prefix was listed", s.source, ErrChanged, where, code)
		case code == 0:
			return fmt.Errorf("runs %s: read %s: %w: %v", s.source, name, ErrUnreachable, err)
		default:
			return fmt.Errorf("runs %s: read %s: %w", s.source, name, err)
		}
		if mt, _, _ := mime.ParseMediaType(ch.ContentType); mt != "application/json" {
			return lab.BadRecord(where, "is a %s stream, not a session: a session's records are JSON events (forklab agent run writes them)", ch.ContentType)
		}
		events, err := session.DecodeBatch(ch.Data)
		if err != nil {
			return lab.BadRecord(where, "is not a session: %v", err)
		}
		for _, e := range events {
			if err := ss.Apply(e); err != nil {
				return lab.BadRecord(where, "is not a session this forklab can fold: %v", err)
			}
			if ss.Branch != nil {
				return lab.BadRecord(where, "is a branch (a fork at step %d, arm %s, replica %d), not a recorded run: give a prefix under which every stream is a run", ss.Branch.ForkStep, ss.Branch.Arm, ss.Branch.Replica)
			}
			if ss.Started && ss.Decl.Name != s.o.Decl.Name {
				return lab.BadRecord(where, "plays world %s, and this sweep plays world %s: sweep it with --world %s", ss.Decl.Name, s.o.Decl.Name, ss.Decl.Name)
			}
			for len(rec.Forks) < len(steps) && ss.Started && ss.Between() && (ss.Play.Over() || ss.Play.Steps() >= steps[len(rec.Forks)]) {
				k := steps[len(rec.Forks)]
				cp, err := ss.Checkpoint(k)
				if err != nil {
					return lab.BadRecord(where, "%v", err)
				}
				rec.Forks = append(rec.Forks, lab.RecordFork{ForkStep: k, Checkpoint: cp})
			}
		}
	}
	if !ss.Started {
		return lab.BadRecord(where, "holds no session_start event: not a session (or one that has not begun)")
	}
	seed := ss.Seed
	rec.Seed = &seed
	for k := len(rec.Forks); k < len(steps); k++ {
		rec.Forks = append(rec.Forks, lab.RecordFork{ForkStep: steps[k],
			Err: fmt.Sprintf("%s has not reached fork step %d: its run has taken %d steps and has no outcome yet (the session is still running; sweep it again with --resume once it has)", where, steps[k], ss.Play.Steps())})
	}
	return nil
}
