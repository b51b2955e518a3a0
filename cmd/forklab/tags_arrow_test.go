//go:build duckdb_arrow

package main

// The binary the tests run is built with the tags this test binary was.
func init() { buildTags = append(buildTags, "duckdb_arrow") }
