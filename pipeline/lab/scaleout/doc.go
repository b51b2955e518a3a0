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
//   - Work units on Kafka (Coordinate, Worker), for pools of workers that
//     come and go. The coordinator publishes one record per unit (UnitMsg:
//     the spec, the output directory, the attempt limit and lease) on a
//     queue's units topic and follows the workers' reports (Report) on its
//     results topic. Workers read the units topic as one consumer group;
//     for each unit they write its files and ledger entry, report it done,
//     and only then commit its offset, so a worker killed at any point
//     leaves the unit to be delivered again, and the ledger makes a second
//     delivery harmless. Attempts are recorded on the shared storage with
//     a heartbeat. An attempt fails only when the unit does (an error, a
//     panic, a crash of the process running it, which forklab worker's
//     supervising process records: Supervise, MarkCrashed); a worker that
//     vanished (killed, preempted) leaves an attempt without a heartbeat,
//     which does not count. A unit whose attempts fail MaxAttempts times
//     is written as error rows naming them (a poison unit), and every
//     retry goes to the end of its partition, so no unit holds up the
//     others. Rebalances, timeouts, a broker restarting are retried with
//     backoff; only a cluster out of reach for longer than
//     Queue.RetryFor stops a worker or a coordinator. A coordinator
//     stopped and started again picks its sweep up from the staging
//     directory's record, the ledger and the topics.
//
// docs/scale-out.md describes the topics, the records, the order of a
// unit's steps, and how to size a sweep.
package scaleout
