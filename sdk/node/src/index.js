// @forklab/agent: write an agent for forklab's fork lab as a declaration
// and the functions start, branch and, optionally, fold; serve() speaks
// forklab-agent/1 for it (docs/agent-protocol.md, docs/sdk-node.md).

import "./stdout.js"; // first: stdout is the protocol's from here on
export { serve, createAgent, AgentError, InvalidParams, BadCheckpoint, RunFailed, codes, PROTOCOL } from "./agent.js";
export { DeclarationError } from "./declaration.js";
export { parseLine, stringifyLine } from "./json.js";
