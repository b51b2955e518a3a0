// Package scaleout runs one sweep on many processes and machines, whose
// units of work land as one results directory.
//
// A sweep is cut into units (sweep.Unit: a block of seeds of one
// configuration, every fork step of it), and a unit's files are the same
// bytes whoever writes them. So the processes need agree on nothing but
// the spec and a shared output directory: each writes the units it is
// given into the directory's staging area (temporary file, fsync, rename,
// then the unit's ledger entry), a unit written twice is harmless, and a
// finishing step checks that every unit is there and publishes the sweep
// with its manifest.
//
// Two ways to hand out the units:
//
//   - A static split (Share, RunShare, Finalize), for batch schedulers such
//     as a Kubernetes Indexed Job: share I of N runs the units whose
//     position is I modulo N; forklab sweep finalize checks that every
//     share is in and publishes.
//   - Work units on Kafka (Coordinator, Worker; docs/scale-out.md), for
//     pools of workers that come and go.
package scaleout
