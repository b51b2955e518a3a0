package pyrand

// Lanes is the number of generators SeedBatch seeds in lockstep. Eight
// independent multiply chains keep a modern core's multiplier busy; the
// chain of a single seed leaves it idle most cycles.
const Lanes = 8

// SeedBatch reseeds each gs[l] like Reseed(uint64(seeds[l])), for seeds below
// 2^32 (a one-word init_by_array key), interleaving the eight seeds' chains.
// The result is identical to eight Reseed calls; only the speed differs.
func SeedBatch(gs *[Lanes]Gen, seeds *[Lanes]uint32) {
	m0 := &gs[0].mt
	m1 := &gs[1].mt
	m2 := &gs[2].mt
	m3 := &gs[3].mt
	m4 := &gs[4].mt
	m5 := &gs[5].mt
	m6 := &gs[6].mt
	m7 := &gs[7].mt
	k0 := seeds[0]
	k1 := seeds[1]
	k2 := seeds[2]
	k3 := seeds[3]
	k4 := seeds[4]
	k5 := seeds[5]
	k6 := seeds[6]
	k7 := seeds[7]
	p0 := base[0]
	p1 := base[0]
	p2 := base[0]
	p3 := base[0]
	p4 := base[0]
	p5 := base[0]
	p6 := base[0]
	p7 := base[0]
	// init_by_array, first loop, with j always 0 for a one-word key.
	for i := 1; i < n; i++ {
		p0 = (base[i] ^ ((p0 ^ (p0 >> 30)) * 1664525)) + k0
		m0[i] = p0
		p1 = (base[i] ^ ((p1 ^ (p1 >> 30)) * 1664525)) + k1
		m1[i] = p1
		p2 = (base[i] ^ ((p2 ^ (p2 >> 30)) * 1664525)) + k2
		m2[i] = p2
		p3 = (base[i] ^ ((p3 ^ (p3 >> 30)) * 1664525)) + k3
		m3[i] = p3
		p4 = (base[i] ^ ((p4 ^ (p4 >> 30)) * 1664525)) + k4
		m4[i] = p4
		p5 = (base[i] ^ ((p5 ^ (p5 >> 30)) * 1664525)) + k5
		m5[i] = p5
		p6 = (base[i] ^ ((p6 ^ (p6 >> 30)) * 1664525)) + k6
		m6[i] = p6
		p7 = (base[i] ^ ((p7 ^ (p7 >> 30)) * 1664525)) + k7
		m7[i] = p7
	}
	// The loop wraps: word 0 takes word n-1 and the n-th step rewrites word 1.
	m0[0] = p0
	p0 = (m0[1] ^ ((p0 ^ (p0 >> 30)) * 1664525)) + k0
	m0[1] = p0
	m1[0] = p1
	p1 = (m1[1] ^ ((p1 ^ (p1 >> 30)) * 1664525)) + k1
	m1[1] = p1
	m2[0] = p2
	p2 = (m2[1] ^ ((p2 ^ (p2 >> 30)) * 1664525)) + k2
	m2[1] = p2
	m3[0] = p3
	p3 = (m3[1] ^ ((p3 ^ (p3 >> 30)) * 1664525)) + k3
	m3[1] = p3
	m4[0] = p4
	p4 = (m4[1] ^ ((p4 ^ (p4 >> 30)) * 1664525)) + k4
	m4[1] = p4
	m5[0] = p5
	p5 = (m5[1] ^ ((p5 ^ (p5 >> 30)) * 1664525)) + k5
	m5[1] = p5
	m6[0] = p6
	p6 = (m6[1] ^ ((p6 ^ (p6 >> 30)) * 1664525)) + k6
	m6[1] = p6
	m7[0] = p7
	p7 = (m7[1] ^ ((p7 ^ (p7 >> 30)) * 1664525)) + k7
	m7[1] = p7
	// Second loop, from word 2 to n-1, then wrapping to word 1.
	for i := 2; i < n; i++ {
		p0 = (m0[i] ^ ((p0 ^ (p0 >> 30)) * 1566083941)) - uint32(i)
		m0[i] = p0
		p1 = (m1[i] ^ ((p1 ^ (p1 >> 30)) * 1566083941)) - uint32(i)
		m1[i] = p1
		p2 = (m2[i] ^ ((p2 ^ (p2 >> 30)) * 1566083941)) - uint32(i)
		m2[i] = p2
		p3 = (m3[i] ^ ((p3 ^ (p3 >> 30)) * 1566083941)) - uint32(i)
		m3[i] = p3
		p4 = (m4[i] ^ ((p4 ^ (p4 >> 30)) * 1566083941)) - uint32(i)
		m4[i] = p4
		p5 = (m5[i] ^ ((p5 ^ (p5 >> 30)) * 1566083941)) - uint32(i)
		m5[i] = p5
		p6 = (m6[i] ^ ((p6 ^ (p6 >> 30)) * 1566083941)) - uint32(i)
		m6[i] = p6
		p7 = (m7[i] ^ ((p7 ^ (p7 >> 30)) * 1566083941)) - uint32(i)
		m7[i] = p7
	}
	m0[0] = p0
	m0[1] = (m0[1] ^ ((p0 ^ (p0 >> 30)) * 1566083941)) - 1
	m0[0] = upperMask
	m1[0] = p1
	m1[1] = (m1[1] ^ ((p1 ^ (p1 >> 30)) * 1566083941)) - 1
	m1[0] = upperMask
	m2[0] = p2
	m2[1] = (m2[1] ^ ((p2 ^ (p2 >> 30)) * 1566083941)) - 1
	m2[0] = upperMask
	m3[0] = p3
	m3[1] = (m3[1] ^ ((p3 ^ (p3 >> 30)) * 1566083941)) - 1
	m3[0] = upperMask
	m4[0] = p4
	m4[1] = (m4[1] ^ ((p4 ^ (p4 >> 30)) * 1566083941)) - 1
	m4[0] = upperMask
	m5[0] = p5
	m5[1] = (m5[1] ^ ((p5 ^ (p5 >> 30)) * 1566083941)) - 1
	m5[0] = upperMask
	m6[0] = p6
	m6[1] = (m6[1] ^ ((p6 ^ (p6 >> 30)) * 1566083941)) - 1
	m6[0] = upperMask
	m7[0] = p7
	m7[1] = (m7[1] ^ ((p7 ^ (p7 >> 30)) * 1566083941)) - 1
	m7[0] = upperMask
	for l := range gs {
		gs[l].idx = 0
	}
}
