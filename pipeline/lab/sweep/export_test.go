package sweep

// MoveIn is the step of an in-place publish that moves a staged entry into
// the output directory, for a test to make it fail.
var MoveIn = &moveIn
