package kafkalog

import (
	"errors"
	"fmt"
)

// Offset is a position in a stream: the Kafka partition that holds the
// stream and a Kafka offset in that partition. Its text form is
// "PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO", two zero-padded 16-digit decimals, so
// that byte-wise comparison of two offsets of one stream orders them as the
// log does (Durable Streams §8: opaque, lexicographically sortable, strictly
// increasing). Clients must treat it as opaque; operators may read it as the
// partition and offset to hand to kcat.
//
// Offsets of one stream are strictly increasing but not contiguous: other
// streams' records sit between them in the shared partition.
type Offset struct {
	Partition int32
	Pos       int64 // Kafka offset in Partition
}

// offsetLen is the length of an offset's text form.
const offsetLen = 16 + 1 + 16

// maxPos is the largest position the 16-digit form can carry.
const maxPos = 9999999999999999

// String renders o in its 33-character text form.
func (o Offset) String() string {
	return fmt.Sprintf("%016d_%016d", o.Partition, o.Pos)
}

// Less reports whether o sorts before b.
func (o Offset) Less(b Offset) bool {
	if o.Partition != b.Partition {
		return o.Partition < b.Partition
	}
	return o.Pos < b.Pos
}

// ErrBadOffset is returned by ParseOffset for text that is not an offset.
var ErrBadOffset = errors.New("malformed offset: want 16 digits, '_', 16 digits (or -1 / now)")

// ParseOffset parses the text form of an Offset. It does not accept the
// protocol's sentinels "-1" and "now"; callers handle those first.
func ParseOffset(s string) (Offset, error) {
	if len(s) != offsetLen || s[16] != '_' {
		return Offset{}, ErrBadOffset
	}
	var p, q int64
	for i := 0; i < offsetLen; i++ {
		if i == 16 {
			continue
		}
		c := s[i]
		if c < '0' || c > '9' {
			return Offset{}, ErrBadOffset
		}
		if i < 16 {
			p = p*10 + int64(c-'0')
		} else {
			q = q*10 + int64(c-'0')
		}
	}
	if p > 1<<31-1 {
		// Larger than any partition: it sorts after every position of any
		// stream, which callers treat as "beyond the tail".
		p = 1<<31 - 1
	}
	return Offset{Partition: int32(p), Pos: q}, nil
}

// position maps an offset onto a Kafka offset in partition part: offsets of
// a lower partition sort before every position of the stream (-1), offsets of
// a higher one after every position (maxPos+1).
func position(o Offset, part int32) int64 {
	switch {
	case o.Partition < part:
		return -1
	case o.Partition > part:
		return maxPos + 1
	}
	return o.Pos
}
