//go:build forklab_faultworld

package main

// The tests' forklab binary has the faulty world (a counter whose
// crash_seed crashes the run), to show how spread sweeps survive it.
import _ "github.com/forklab/forklab/pipeline/lab/scaleout/faulty"
