package main

// The binary the tests run has the faulty world (cmd/forklab/faultworld.go).
func init() { buildTags = append(buildTags, "forklab_faultworld") }
