package pyrand

// The seeding kernels fill b.st with the state init_by_array leaves for each
// lane's key in b.keys, starting from base = init_genrand(19650218), and set
// word 0 to 0x80000000 as CPython's init_by_array does. Then they twist
// words 0..nPre-1 and store the first nPre outputs of every lane in b.out,
// so that a task's few draws read one small, hot array. The kernels are
// identical in result; kernels lists those this processor can run, fastest
// first.

// kernel is one implementation of Batch seeding.
type kernel struct {
	name string
	seed func(*Batch)
}

// defaultKernel is the fastest kernel this processor runs, the first entry
// of kernels().
var defaultKernel = kernels()[0]

// seedKernel is the kernel Batch uses, defaultKernel's. Tests swap it to
// exercise every path.
var seedKernel = defaultKernel.seed

// Multipliers of init_by_array's two loops (mt19937ar.c).
const (
	mulKey   = 1664525
	mulSweep = 1566083941
)

// seedGo is the portable kernel. It seeds eight lanes at a time, keeping
// their eight chains in registers so that the processor overlaps their
// multiplies.
func seedGo(b *Batch) {
	for c := 0; c < BatchLanes; c += 8 {
		seedGo8(&b.st, c, (*[8]uint32)(b.keys[0][c:]), (*[8]uint32)(b.keys[1][c:]))
	}
	pretwistGo(b)
}

// seedGo8 runs init_by_array for lanes c..c+7 with keys ka (added on even
// steps) and kb (odd steps).
func seedGo8(st *[n][BatchLanes]uint32, c int, ka, kb *[8]uint32) {
	p0 := base[0]
	p1 := base[0]
	p2 := base[0]
	p3 := base[0]
	p4 := base[0]
	p5 := base[0]
	p6 := base[0]
	p7 := base[0]
	// First loop: step t = i-1 writes word i from base[i] and adds
	// key[t mod 2]: ka for odd i, kb for even i.
	for i := 1; i < n; i++ {
		k := ka
		if i&1 == 0 {
			k = kb
		}
		bi := base[i]
		row := (*[8]uint32)(st[i][c:])
		p0 = (bi ^ ((p0 ^ (p0 >> 30)) * mulKey)) + k[0]
		p1 = (bi ^ ((p1 ^ (p1 >> 30)) * mulKey)) + k[1]
		p2 = (bi ^ ((p2 ^ (p2 >> 30)) * mulKey)) + k[2]
		p3 = (bi ^ ((p3 ^ (p3 >> 30)) * mulKey)) + k[3]
		p4 = (bi ^ ((p4 ^ (p4 >> 30)) * mulKey)) + k[4]
		p5 = (bi ^ ((p5 ^ (p5 >> 30)) * mulKey)) + k[5]
		p6 = (bi ^ ((p6 ^ (p6 >> 30)) * mulKey)) + k[6]
		p7 = (bi ^ ((p7 ^ (p7 >> 30)) * mulKey)) + k[7]
		row[0] = p0
		row[1] = p1
		row[2] = p2
		row[3] = p3
		row[4] = p4
		row[5] = p5
		row[6] = p6
		row[7] = p7
	}
	// Wrap: word 0 takes word n-1 and step n-1 (odd, kb) rewrites word 1.
	row0, row1 := (*[8]uint32)(st[0][c:]), (*[8]uint32)(st[1][c:])
	row0[0] = p0
	row0[1] = p1
	row0[2] = p2
	row0[3] = p3
	row0[4] = p4
	row0[5] = p5
	row0[6] = p6
	row0[7] = p7
	p0 = (row1[0] ^ ((p0 ^ (p0 >> 30)) * mulKey)) + kb[0]
	p1 = (row1[1] ^ ((p1 ^ (p1 >> 30)) * mulKey)) + kb[1]
	p2 = (row1[2] ^ ((p2 ^ (p2 >> 30)) * mulKey)) + kb[2]
	p3 = (row1[3] ^ ((p3 ^ (p3 >> 30)) * mulKey)) + kb[3]
	p4 = (row1[4] ^ ((p4 ^ (p4 >> 30)) * mulKey)) + kb[4]
	p5 = (row1[5] ^ ((p5 ^ (p5 >> 30)) * mulKey)) + kb[5]
	p6 = (row1[6] ^ ((p6 ^ (p6 >> 30)) * mulKey)) + kb[6]
	p7 = (row1[7] ^ ((p7 ^ (p7 >> 30)) * mulKey)) + kb[7]
	row1[0] = p0
	row1[1] = p1
	row1[2] = p2
	row1[3] = p3
	row1[4] = p4
	row1[5] = p5
	row1[6] = p6
	row1[7] = p7
	// Second loop: words 2..n-1, then wrapping to word 1.
	for i := 2; i < n; i++ {
		row := (*[8]uint32)(st[i][c:])
		d := uint32(i)
		p0 = (row[0] ^ ((p0 ^ (p0 >> 30)) * mulSweep)) - d
		p1 = (row[1] ^ ((p1 ^ (p1 >> 30)) * mulSweep)) - d
		p2 = (row[2] ^ ((p2 ^ (p2 >> 30)) * mulSweep)) - d
		p3 = (row[3] ^ ((p3 ^ (p3 >> 30)) * mulSweep)) - d
		p4 = (row[4] ^ ((p4 ^ (p4 >> 30)) * mulSweep)) - d
		p5 = (row[5] ^ ((p5 ^ (p5 >> 30)) * mulSweep)) - d
		p6 = (row[6] ^ ((p6 ^ (p6 >> 30)) * mulSweep)) - d
		p7 = (row[7] ^ ((p7 ^ (p7 >> 30)) * mulSweep)) - d
		row[0] = p0
		row[1] = p1
		row[2] = p2
		row[3] = p3
		row[4] = p4
		row[5] = p5
		row[6] = p6
		row[7] = p7
	}
	row1[0] = (row1[0] ^ ((p0 ^ (p0 >> 30)) * mulSweep)) - 1
	row1[1] = (row1[1] ^ ((p1 ^ (p1 >> 30)) * mulSweep)) - 1
	row1[2] = (row1[2] ^ ((p2 ^ (p2 >> 30)) * mulSweep)) - 1
	row1[3] = (row1[3] ^ ((p3 ^ (p3 >> 30)) * mulSweep)) - 1
	row1[4] = (row1[4] ^ ((p4 ^ (p4 >> 30)) * mulSweep)) - 1
	row1[5] = (row1[5] ^ ((p5 ^ (p5 >> 30)) * mulSweep)) - 1
	row1[6] = (row1[6] ^ ((p6 ^ (p6 >> 30)) * mulSweep)) - 1
	row1[7] = (row1[7] ^ ((p7 ^ (p7 >> 30)) * mulSweep)) - 1
	row0[0] = upperMask
	row0[1] = upperMask
	row0[2] = upperMask
	row0[3] = upperMask
	row0[4] = upperMask
	row0[5] = upperMask
	row0[6] = upperMask
	row0[7] = upperMask
}

// pretwistGo twists words 0..nPre-1 of every lane, in order, exactly as the
// first nPre calls of Lane.Uint32 would (row i reads row i+1 before it is
// twisted, and row i+m, which these rows never reach), and stores the
// tempered outputs in b.out.
func pretwistGo(b *Batch) {
	st := &b.st
	for i := range nPre {
		cur, next, far, out := &st[i], &st[i+1], &st[i+m], &b.out[i]
		for l := range BatchLanes {
			y := (cur[l] & upperMask) | (next[l] & lowerMask)
			v := far[l] ^ (y >> 1) ^ (-(y & 1) & matrixA)
			cur[l] = v
			out[l] = temper(v)
		}
	}
}

// allKernelNames names every kernel on any architecture, so that tests can
// report the ones this processor cannot run as skipped.
var allKernelNames = []string{"avx512", "avx2", "go"}
