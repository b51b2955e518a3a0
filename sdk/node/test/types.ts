// Compiled by types.test.js with tsc --noEmit --strict: the SDK's types
// accept an agent written as the docs show, and refuse what the protocol
// refuses. Each @ts-expect-error must be an error, or tsc fails.
import { serve, createAgent, InvalidParams, type AgentDefinition, type Declaration, type BranchOutcome } from "../src/index.js";
import { langgraph, type LangGraphOptions } from "../src/langgraph.js";

const declaration: Declaration = {
  name: "coin",
  version: "1",
  features: [{ name: "heads", type: "int" }],
  hidden: [{ name: "flawed", type: "bool" }],
  interventions: [{ arm: "on", action: "reweigh" }],
  cost: { fields: ["steps", "usd"] },
  volatile: ["forks[*].checkpoint.ts"],
};

const coin: AgentDefinition = {
  declaration,
  start: ({ seed, fork_steps }) => ({
    task: {},
    forks: fork_steps.map((k) => ({ fork_step: k, over: false, checkpoint: { seed: String(seed), k }, features: { heads: 0 }, hidden: { flawed: false }, cost: { steps: k, usd: 0 } })),
  }),
  async branch({ branches, checkpoint }) {
    if (typeof checkpoint !== "object") throw new InvalidParams("not a coin checkpoint");
    return { branches: branches.map((b): BranchOutcome => ({ success: b.intervention !== null, cost: { steps: 1 }, details: { thread: b.branch_id ?? b.noise_key } })) };
  },
};
void serve;
createAgent(coin);

// @ts-expect-error: a field's type is one of bool, int, float, enum
const badField: Declaration = { ...declaration, features: [{ name: "x", type: "string" }] };
// @ts-expect-error: only on and placebo take an intervention
const badArm: Declaration = { ...declaration, interventions: [{ arm: "aa", action: "x" }] };
// @ts-expect-error: a branch outcome's success is a boolean
const badOutcome: BranchOutcome = { success: "yes", cost: { steps: 1 } };
// @ts-expect-error: start is required
const noStart: AgentDefinition = { declaration, branch: () => ({ branches: [] }) };
void [badField, badArm, badOutcome, noStart];

interface State {
  messages: string[];
  turns: number;
}
const options: LangGraphOptions<State> = {
  declaration,
  graph: { invoke: async () => ({}), getState: async () => ({ values: {}, next: [], config: {} }), updateState: async () => ({}), nodes: {} },
  input: ({ seed }) => ({ messages: [`seed ${seed}`] }),
  features: (s) => ({ heads: s.turns }),
  cost: (s) => ({ steps: s.turns }),
  success: (s) => s.messages.length > 0,
  // @ts-expect-error: interventions map actions to node names
  interventions: { reweigh: 3 },
};
void langgraph;
void options;

// A recorded store: runs and load, typed as start's result; inspect.
const recorded: AgentDefinition = {
  ...coin,
  runs: ({ cursor, limit }) => ({ runs: [{ run_id: `t-${cursor ?? 0}-${limit}`, metadata: { user: "ann" } }], next_cursor: null }),
  load: ({ run_id, fork_steps }) => ({ task: {}, forks: fork_steps.map((k) => ({ fork_step: k, over: false, checkpoint: { run_id }, features: { heads: 0 }, hidden: {}, cost: { steps: k } })) }),
  inspect: ({ checkpoint, fork_step }) => ({ over: checkpoint === null, features: { heads: fork_step ?? 0 }, hidden: {}, cost: { steps: 0 } }),
};
createAgent(recorded);
// @ts-expect-error: a page's next_cursor is required (null after the last)
const noCursor: AgentDefinition = { ...coin, runs: () => ({ runs: [] }), load: coin.start as never };
void noCursor;

const withRecorded: LangGraphOptions<State> = {
  ...options,
  interventions: {},
  recorded: { threads: () => ["ticket-1", { thread_id: "ticket-2", metadata: { user: "ann" } }], metadata: (id) => ({ id }) },
};
// @ts-expect-error: a recorded thread's id is a string
const badThreads: LangGraphOptions<State> = { ...withRecorded, recorded: { threads: () => [3] } };
void [withRecorded, badThreads];
