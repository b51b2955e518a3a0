// Package agentproc puts an external agent in the fork lab: a program in
// any language that speaks forklab-agent/1 (docs/agent-protocol.md) —
// JSON-RPC 2.0, one JSON value per line, on the agent process's stdin and
// stdout, as MCP's stdio transport — becomes a lab.Definition whose
// declaration is the agent's own and whose runners send the work to it.
// Everything downstream (the sweep, its Parquet tables, SQL, reports)
// cannot tell it from a built-in world.
//
// The model:
//
//   - A Definition owns a Pool of long-lived agent processes (Config.Parallel),
//     each initialized once (version negotiation, the world declaration):
//     the first is started by Open, whose declaration it learns, and serves
//     the work too; the others start on demand. Every process must declare
//     what the first did; one that does not stops the work (ErrInconsistent,
//     naming the field). Any process may answer any request: the protocol
//     requires answers to depend on the request alone, a checkpoint carrying
//     everything a branch needs. A simple command line is exec'd by the
//     shell, so the process forklab names by pid is the agent itself; a
//     compound line's shell is called so only while /proc shows it is.
//   - A request that fails — the process exited, missed its deadline
//     (Config.Timeout per run or branch asked), wrote something that is not
//     its reply or a result that breaks the schema or the declaration, or
//     answered with an error worth retrying — is sent again after a
//     backoff, to a new process if the process was at fault (its process
//     group killed), up to Config.Retries times; then the runs or branches
//     it asked for are reported as errors, which the sweep writes as error
//     rows, never labels. A batch line that fails as a whole is sent again
//     one request per line, so that one bad request does not fail its
//     neighbours; the batch counts as one try of each (Config.Warn is told
//     of the first).
//   - Work goes to a process that runs before an idle slot is started
//     (Pool.take): a process is started only when the work needs one more
//     at once, and once — its start-up, seconds for an interpreter and a
//     framework, is not paid again. Config.Parallel defaults to one per CPU.
//   - With Config.FailFast, an agent broken on every request stops the
//     work within a minute instead of being restarted for hours
//     (failfast.go): its first attempts all failing, or more than a share
//     of its last 100; runners then return a *FailingError (ErrFailing)
//     quoting the last failure, the seeds finished before kept.
//   - In a sweep every branch request carries the sweep's id and each
//     branch its identity (BranchID), which an agent may name its
//     framework's thread after.
//   - A runner plays a block of seeds at once across the pool (batches of
//     requests when the agent takes them) and emits the seeds in seed order,
//     so a sweep's files do not depend on the pool's size or timing. It is
//     Costly: the sweep writes its units buffered and never plays them twice.
//   - Every seed an agent finished without error is journaled (its raw
//     replies) in the sweep's staging directory as soon as it is in: a sweep
//     interrupted at any moment, stopped at its budget (Definition.Stop) or
//     finished with error rows, and resumed, replays those seeds and asks
//     the agent for the others only. No finished fork is paid for twice.
//   - Every reply — in a sweep, a fork, agent check — goes through one
//     validator (roundTrip): its envelope, its id (one of the request's; a
//     wrong one is named with the ids expected), then its result.
//   - Replies are decoded strictly against the protocol's JSON Schemas
//     (schemas/agent-protocol) and the declaration; a malformed reply is an
//     error naming the field. The schemas are consulted only to word a
//     refusal: strict decoding accepts nothing they refuse
//     (TestStrictDecodingIsTheSchema), and costs far less per reply.
//
// Serve is the other side: it serves a registered built-in world over the
// protocol (forklab agent serve), and sweeping through it gives the
// in-process sweep's files byte for byte. Check is forklab agent check's
// conformance suite. Fold and ForkFromLog fork an agent's session on the
// session log through the agent's fold.
package agentproc
