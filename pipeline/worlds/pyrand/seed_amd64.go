package pyrand

import "golang.org/x/sys/cpu"

// seedAVX512 runs init_by_array for 256 lanes (sixteen 16-lane zmm chains):
// st points at word 0 of the first lane of a column block of a Batch state
// (row stride BatchLanes words), keys at the same column of Batch.keys[0],
// base at base[0]. Written in seed_amd64.s.
//
//go:noescape
func seedAVX512(st *uint32, keys *uint32, base *uint32)

// seedAVX2 is seedAVX512 for 64 lanes (eight 8-lane ymm chains).
//
//go:noescape
func seedAVX2(st *uint32, keys *uint32, base *uint32)

// pretwistAVX512 twists words 0..nPre-1 of every lane of the state at st
// (a Batch's st) and writes their outputs to out (its out), as pretwistGo
// does, sixteen lanes per instruction.
//
//go:noescape
func pretwistAVX512(st *uint32, out *uint32)

// pretwistAVX2 is pretwistAVX512 with eight lanes per instruction.
//
//go:noescape
func pretwistAVX2(st *uint32, out *uint32)

// The AVX-512 kernel seeds 256 lanes per call.
var _ = [1]struct{}{}[BatchLanes%256]

func seedBatchAVX512(b *Batch) {
	for c := 0; c < BatchLanes; c += 256 {
		seedAVX512(&b.st[0][c], &b.keys[0][c], &base[0])
	}
	pretwistAVX512(&b.st[0][0], &b.out[0][0])
}

func seedBatchAVX2(b *Batch) {
	for c := 0; c < BatchLanes; c += 64 {
		seedAVX2(&b.st[0][c], &b.keys[0][c], &base[0])
	}
	pretwistAVX2(&b.st[0][0], &b.out[0][0])
}

func kernels() []kernel {
	var ks []kernel
	// x/sys/cpu reports AVX-512 and AVX2 only when the OS saves their
	// register state as well.
	if cpu.X86.HasAVX512F {
		ks = append(ks, kernel{"avx512", seedBatchAVX512})
	}
	if cpu.X86.HasAVX2 {
		ks = append(ks, kernel{"avx2", seedBatchAVX2})
	}
	return append(ks, kernel{"go", seedGo})
}
