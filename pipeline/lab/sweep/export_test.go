package sweep

// LayoutRedos is layoutRedos for the external tests.
func LayoutRedos() int64 { return layoutRedos.Load() }

// MoveIn is the step of an in-place publish that moves a staged entry into
// the output directory, for a test to make it fail.
var MoveIn = &moveIn
