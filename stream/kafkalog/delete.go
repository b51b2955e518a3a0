package kafkalog

import (
	"context"
	"time"
)

// Delete deletes a stream (protocol §5.4). A stream that forks still
// inherit from is soft-deleted: gone to clients, kept for the forks' reads,
// and removed when its last fork is (§4.2). The records stay in Kafka until
// the topic's retention removes them.
func (l *Log) Delete(ctx context.Context, name string) error {
	adm, err := l.lockAdmin(ctx)
	if err != nil {
		return err
	}
	defer adm.release()
	s, err := l.lookup(name)
	if err != nil {
		return err
	}
	return l.writeDelete(ctx, adm, s, "")
}

// writeDelete writes a delete record for s under the admin lock.
func (l *Log) writeDelete(ctx context.Context, adm *adminLock, s *stream, reason string) error {
	var rerr error
	err := adm.submit(ctx, l.parts[s.meta.part], &op{size: 512, decide: func(t *tx) *pending {
		if s.w.deleted {
			if s.w.soft {
				rerr = errSoftGone
			} else {
				rerr = errNotFound
			}
			return nil
		}
		t.touch(s)
		r := &record{op: opDelete, stream: s.meta.name, gen: s.meta.gen, rec: s.w.allocRec(),
			contentType: s.meta.contentType, reason: reason, ttl: -1, forkCut: -1, forkCutKoff: -1}
		s.w.nextRec = r.rec + 1
		s.w.deleted = true
		s.w.soft = s.w.refs > 0
		return &pending{rec: r, commit: func(int64) {
			s.w.deleted = false // applyDelete decides soft or hard from refs
			l.applyDelete(s)
		}}
	}})
	if err != nil {
		return err
	}
	return rerr
}

// applyDelete deletes s: soft when forks still inherit from it, else it is
// removed and its source's reference dropped, cascading up a chain of
// soft-deleted sources.
func (l *Log) applyDelete(s *stream) {
	s.w.deleted = true
	if s.w.refs > 0 {
		s.w.soft = true
		s.mu.Lock()
		s.soft = true
		s.changedLocked()
		s.mu.Unlock()
		return
	}
	for s != nil {
		s.w.deleted, s.w.soft = true, false
		s.mu.Lock()
		s.removed, s.soft = true, false
		s.changedLocked()
		s.mu.Unlock()
		l.mu.Lock()
		if l.streams[s.meta.name] == s {
			delete(l.streams, s.meta.name)
		}
		if s.meta.gen > l.removed[s.meta.name] {
			l.removed[s.meta.name] = s.meta.gen
		}
		if p := l.parts[s.meta.part]; s.meta.gen > p.removed[s.meta.name] {
			p.removed[s.meta.name] = s.meta.gen
		}
		l.mu.Unlock()
		src := s.meta.source
		s = nil
		if src != nil {
			src.w.refs--
			if src.w.soft && src.w.refs == 0 {
				s = src
			}
		}
	}
}

// expireNow writes the delete record of a stream whose TTL or expiry has
// passed, under the admin lock.
func (l *Log) expireNow(ctx context.Context, adm *adminLock, s *stream) error {
	err := l.writeDelete(ctx, adm, s, "expired")
	if k := KindOf(err); k == NotFound || k == Gone {
		return nil
	}
	return err
}

// expireLoop deletes streams whose TTL or expiry has passed (protocol §4:
// TTL/Expiry). Lookups treat an expired stream as absent even before its
// delete record is written.
func (l *Log) expireLoop() {
	defer l.wg.Done()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	ticks := 0
	for {
		select {
		case <-l.stop:
			return
		case now := <-tick.C:
			ticks++
			if ticks%8 == 0 {
				for _, p := range l.parts {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					if ls, _, err := l.offsets(ctx, p.id); err == nil {
						p.noteLogStart(ls)
					}
					cancel()
				}
			}
			var due []*stream
			l.mu.RLock()
			for _, s := range l.streams {
				if (s.meta.ttl >= 0 || !s.meta.expiresAt.IsZero()) && s.expired(now) {
					due = append(due, s)
				}
			}
			l.mu.RUnlock()
			for _, s := range due {
				if s.snapshot().soft {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*l.cfg.WriteTimeout)
				adm, err := l.lockAdmin(ctx)
				if err == nil {
					err = l.expireNow(ctx, adm, s)
					adm.release()
				}
				if err != nil {
					l.cfg.Logf("kafkalog: expire %q: %v", s.meta.name, err)
				}
				cancel()
			}
		}
	}
}
