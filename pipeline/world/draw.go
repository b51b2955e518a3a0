package world

// Purpose names what a random draw is for, so draws for different purposes
// at the same index are independent.
type Purpose uint64

// The purposes used by the worlds and agents in this module.
const (
	PurposeStall Purpose = iota + 1
	PurposeObsNoise
	PurposeObsNoiseSign
	PurposeRefreshFail
	PurposeModel
	PurposeModelNoTool
)

// Draw returns a uniform float64 in [0, 1) that is a pure function of its
// arguments: key identifies the random stream (a task seed, or a seed mixed
// with a fork step, arm and replica by Key), purpose what is drawn, and index
// which draw of that purpose it is. It hashes with the SplitMix64 finaliser
// (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014), keeping the top 53 bits.
func Draw(key uint64, purpose Purpose, index int) float64 {
	h := mix(key ^ mix(uint64(purpose)*0x9e3779b97f4a7c15^uint64(index)))
	return float64(h>>11) * (1.0 / (1 << 53))
}

// Key mixes a task seed with the identifiers of one random stream (for the
// agent's noise: fork step, arm and replica) into a stream key for Draw.
func Key(seed uint64, parts ...uint64) uint64 {
	k := mix(seed + 0x9e3779b97f4a7c15)
	for _, p := range parts {
		k = mix(k ^ (p + 0x9e3779b97f4a7c15))
	}
	return k
}

func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
