// Package plural writes a count with its noun as English does: "1 unit",
// "3 units", "0 units", so that no message of forklab reads "1 units"
// (issue 26). Count takes the regular plural (the noun plus "s"); Of takes
// both forms, for the irregular ones ("1 process", "2 processes").
//
// The lab (pipeline/) and the command both write counts, so the package
// lives in internal/.
package plural

import "strconv"

// Integer is any integer type a count comes in.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// Count writes n and noun, adding "s" unless n is 1: Count(1, "unit") is
// "1 unit", Count(0, "unit") "0 units", Count(-1, "step") "-1 step".
func Count[T Integer](n T, noun string) string {
	return Of(n, noun, noun+"s")
}

// Of writes n and one (n is 1 or -1) or many (any other n): Of(2,
// "process", "processes") is "2 processes".
func Of[T Integer](n T, one, many string) string {
	return strconv.FormatInt(int64(n), 10) + " " + Word(n, one, many)
}

// Word is one when n is 1 or -1, else many, without the number: for
// sentences that put words between the count and its noun.
func Word[T Integer](n T, one, many string) string {
	if n == 1 || int64(n) == -1 {
		return one
	}
	return many
}
