package schemas

import "embed"

// AgentProtocol holds the JSON Schemas of forklab-agent/1, the protocol
// between forklab and an external agent (docs/agent-protocol.md): one file
// per message body (initialize.params, initialize.result, start.params, …),
// the request and response envelopes, the world declaration, and
// common.schema.json with the definitions they share. Each file's $id is
// https://forklab.dev/schemas/agent-protocol/NAME; files refer to each
// other by relative URL.
//
//go:embed agent-protocol/*.schema.json
var AgentProtocol embed.FS
