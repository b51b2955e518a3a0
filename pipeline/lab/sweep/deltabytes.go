package sweep

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go/encoding/delta"
)

// deltaByteArray is parquet-go's DELTA_BYTE_ARRAY encoding (incremental,
// or front, coding: each value is stored as the length of the prefix it
// shares with the value before and the rest) with a faster search for that
// prefix.
//
// Why it exists: parquet-go finds a prefix longer than 64 bytes by binary
// search, comparing whole prefixes with bytes.Equal at each probe; for the
// checkpoint JSON, whose neighbours share a few hundred bytes, that search
// cost about as much as compressing the column. This one first tries the
// prefix the value before shared with its own predecessor (consecutive
// checkpoints differ at about the same place: one vectorised compare of
// the whole prefix usually settles it), then goes on eight bytes at a
// time. The longest common prefix is unique, so the bytes are
// parquet-go's: TestDeltaByteArrayMatchesParquetGo holds it to that.
// Decoding is parquet-go's.
type deltaByteArray struct {
	delta.ByteArrayEncoding
}

var lengthBuffers = sync.Pool{New: func() any { return new([2][]int32) }}

// EncodeByteArray encodes the values src[offsets[i]:offsets[i+1]].
func (e *deltaByteArray) EncodeByteArray(dst []byte, src []byte, offsets []uint32) ([]byte, error) {
	lengths := lengthBuffers.Get().(*[2][]int32)
	defer lengthBuffers.Put(lengths)
	prefix, suffix := lengths[0][:0], lengths[1][:0]
	var last []byte
	total, p := 0, 0
	for i := 1; i < len(offsets); i++ {
		v := src[offsets[i-1]:offsets[i]]
		p = commonPrefixFrom(last, v, p)
		prefix = append(prefix, int32(p))
		suffix = append(suffix, int32(len(v)-p))
		total += len(v) - p
		last = v
	}
	lengths[0], lengths[1] = prefix, suffix

	var bp delta.BinaryPackedEncoding
	dst, err := bp.EncodeInt32(dst[:0], prefix)
	if err != nil {
		return dst, err
	}
	n := len(dst)
	// BinaryPackedEncoding writes from the start of its buffer: encode the
	// suffix lengths past the prefix lengths, in the same array.
	tail, err := bp.EncodeInt32(dst[n:], suffix)
	if err != nil {
		return dst, err
	}
	dst = append(dst[:n], tail...)
	dst = slices.Grow(dst, total)
	for i := 1; i < len(offsets); i++ {
		dst = append(dst, src[offsets[i-1]+uint32(prefix[i-1]):offsets[i]]...)
	}
	return dst, nil
}

// commonPrefixFrom returns the length of the longest common prefix of a
// and b, trying first whether they share their first hint bytes (one
// vectorised compare) and if so searching on from there.
func commonPrefixFrom(a, b []byte, hint int) int {
	if hint >= 8 && hint <= len(a) && hint <= len(b) && bytes.Equal(a[:hint], b[:hint]) {
		return hint + commonPrefix(a[hint:], b[hint:])
	}
	return commonPrefix(a, b)
}

// commonPrefix returns the length of the longest common prefix of a and b:
// 64 bytes at a time while they are equal (bytes.Equal is vectorised), then
// eight, then one.
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for i+64 <= n && bytes.Equal(a[i:i+64], b[i:i+64]) {
		i += 64
	}
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for ; i < n && a[i] == b[i]; i++ {
	}
	return i
}
