package kafkalog

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
)

// Offset is a position in a stream, as the server issues it: the Kafka
// partition that holds the stream, a Kafka offset in that partition, and a
// stamp naming the stream generation that issued it. Its text form is
//
//	PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO_G_CCCCCCCC
//
// the partition and the Kafka offset as zero-padded 16-digit decimals, the
// generation of the issuing stream (decimal, 1 for the first stream ever
// created under its name) and an 8-hex-digit check over the issuing
// stream's name, its generation, the partition and the Kafka offset.
//
// Byte-wise comparison orders the offsets of one stream as the log does
// (Durable Streams §8: opaque, lexicographically sortable, strictly
// increasing): the first 33 characters have a fixed width and differ for
// distinct positions, and one position of a stream always carries the same
// stamp. Clients treat offsets as opaque; an operator may read the first
// two fields as "partition P, Kafka offset O".
//
// The stamp is what makes an offset belong to its stream: a reader handing
// back an offset of another stream, of an earlier generation of the same
// name, or with a digit changed is refused instead of being served data
// from a position the stream never issued (see stream.resolve).
//
// The bare 33-character form "0000000000000000_0000000000000000" (Zero) is
// accepted as the beginning of any stream; records written by earlier
// versions also carry fork offsets in the bare form, which ParseOffset
// reads with Gen 0.
//
// Offsets of one stream are strictly increasing but not contiguous: other
// streams' records sit between them in the shared partition.
type Offset struct {
	Partition int32
	Pos       int64  // Kafka offset in Partition
	Gen       int64  // generation of the issuing stream; 0 for the bare form
	Sum       uint32 // check over the issuing stream's name, Gen, Partition and Pos
}

// Zero is the bare all-zero offset, which sorts before every position and
// means the beginning of any stream (the conformance suite forks at it).
var Zero = Offset{}

// bareLen is the length of the bare form, stampedMin the shortest stamped one.
const (
	bareLen    = 16 + 1 + 16
	stampedMin = bareLen + 1 + 1 + 1 + 8
	maxGenLen  = 19 // digits of math.MaxInt64
)

// MaxPos is the largest Kafka offset the 16-digit form can carry.
const MaxPos = 9999999999999999

// String renders o in its text form: stamped when Gen > 0, bare otherwise.
func (o Offset) String() string {
	if o.Partition < 0 || o.Pos < 0 {
		// Not a position the log issues; printed as fmt does.
		if o.Gen <= 0 {
			return fmt.Sprintf("%016d_%016d", o.Partition, o.Pos)
		}
		return fmt.Sprintf("%016d_%016d_%d_%08x", o.Partition, o.Pos, o.Gen, o.Sum)
	}
	// By hand, not fmt: it is printed once per append.
	var b [64]byte
	out := appendPadded(b[:0], uint64(o.Partition), 16)
	out = append(out, '_')
	out = appendPadded(out, uint64(o.Pos), 16)
	if o.Gen > 0 {
		out = append(out, '_')
		out = strconv.AppendInt(out, o.Gen, 10)
		out = append(out, '_')
		out = appendPadded16(out, o.Sum)
	}
	return string(out)
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(b []byte, v uint64, width int) []byte {
	var d [20]byte
	i := len(d)
	for v > 0 || i == len(d) {
		i--
		d[i] = byte('0' + v%10)
		v /= 10
	}
	for n := len(d) - i; n < width; n++ {
		b = append(b, '0')
	}
	return append(b, d[i:]...)
}

// appendPadded16 appends v in lower-case hexadecimal, zero-padded to 8 digits.
func appendPadded16(b []byte, v uint32) []byte {
	const hex = "0123456789abcdef"
	for shift := 28; shift >= 0; shift -= 4 {
		b = append(b, hex[(v>>shift)&0xf])
	}
	return b
}

// Less reports whether o sorts before b in a stream: by partition, then by
// Kafka offset. It agrees with the byte-wise order of the text forms.
func (o Offset) Less(b Offset) bool {
	if o.Partition != b.Partition {
		return o.Partition < b.Partition
	}
	return o.Pos < b.Pos
}

// IsZero reports whether o is the bare all-zero offset.
func (o Offset) IsZero() bool { return o == Zero }

// ErrBadOffset is returned by ParseOffset for text that is not an offset.
var ErrBadOffset = errors.New("malformed offset: want the Stream-Next-Offset value the server returned (or -1 / now)")

// ParseOffset parses the text form of an Offset, bare or stamped. It checks
// the syntax only (digits, widths, a partition that fits an int32, a
// generation ≥ 1); whether the offset was issued for a given stream is the
// stream's question. It does not accept the protocol's sentinels "-1" and
// "now"; callers handle those first.
func ParseOffset(s string) (Offset, error) {
	if len(s) != bareLen && (len(s) < stampedMin || len(s) > stampedMin-1+maxGenLen) {
		return Offset{}, ErrBadOffset
	}
	if s[16] != '_' {
		return Offset{}, ErrBadOffset
	}
	p, ok1 := digits(s[:16])
	q, ok2 := digits(s[17:bareLen])
	if !ok1 || !ok2 || p > math.MaxInt32 {
		return Offset{}, ErrBadOffset
	}
	o := Offset{Partition: int32(p), Pos: q}
	if len(s) == bareLen {
		return o, nil
	}
	rest := s[bareLen:]
	sum := rest[len(rest)-9:]
	gen := rest[1 : len(rest)-9]
	if rest[0] != '_' || sum[0] != '_' || gen == "" || gen[0] == '0' {
		return Offset{}, ErrBadOffset
	}
	g, ok := digits(gen)
	if !ok {
		return Offset{}, ErrBadOffset
	}
	for i := 1; i < len(sum); i++ {
		if c := sum[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return Offset{}, ErrBadOffset
		}
	}
	c, err := strconv.ParseUint(sum[1:], 16, 32)
	if err != nil {
		return Offset{}, ErrBadOffset
	}
	o.Gen, o.Sum = g, uint32(c)
	return o, nil
}

// digits parses a run of decimal digits that fits an int64.
func digits(s string) (int64, bool) {
	if s == "" || len(s) > maxGenLen {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n > math.MaxInt64 || (len(s) == maxGenLen && s > "9223372036854775807") {
		return 0, false
	}
	return int64(n), true
}

// offsetSum is the check of an offset issued by stream generation gen of
// name at pos in partition part: FNV-1a, 32 bits, over all four. It is not
// a secret (anyone can compute it); the position must also be one of the
// stream's boundaries (stream.resolve).
func offsetSum(name string, gen int64, part int32, pos int64) uint32 {
	h := fnv.New32a()
	var b [8 + 4 + 8]byte
	putInt := func(dst []byte, v uint64, n int) {
		for i := 0; i < n; i++ {
			dst[i] = byte(v >> (8 * (n - 1 - i)))
		}
	}
	putInt(b[0:8], uint64(gen), 8)
	putInt(b[8:12], uint64(uint32(part)), 4)
	putInt(b[12:20], uint64(pos), 8)
	h.Write([]byte(name))
	h.Write([]byte{0})
	h.Write(b[:])
	return h.Sum32()
}

// stamp is the offset of pos in partition part as issued by generation gen
// of name.
func stamp(name string, gen int64, part int32, pos int64) Offset {
	return Offset{Partition: part, Pos: pos, Gen: gen, Sum: offsetSum(name, gen, part, pos)}
}
