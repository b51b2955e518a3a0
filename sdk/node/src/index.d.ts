// Types of @forklab/agent: the messages of forklab-agent/1 (docs/agent-protocol.md,
// schemas/agent-protocol/) and the SDK's API (docs/sdk-node.md).

/** The protocol version the SDK speaks. */
export declare const PROTOCOL: "forklab-agent/1";

/** One declared value: a boolean, a number (an integer within ±2^53 for int fields), a string (enum), or null (nullable fields). */
export type Value = boolean | number | string | null;
/** Declared values by name: every field of the group, and no other. */
export type Values = Record<string, Value>;
/** A task seed: a number up to 2^53-1, a BigInt above (up to 2^63-2). */
export type Seed = number | bigint;

/** A declared field: a task draw, a feature or a hidden truth. */
export interface Field {
  name: string;
  type: "bool" | "int" | "float" | "enum";
  /** An enum's values; only for enums. */
  values?: string[];
  unit?: string;
  nullable?: boolean;
  description?: string;
}

/** A parameter a sweep may set (--param key=value). */
export interface Param {
  name: string;
  type: "bool" | "int" | "float" | "enum" | "int_list" | "float_list";
  default: boolean | number | string | number[];
  /** Inclusive bounds of an int or float, or of each value of a list. */
  min?: number;
  max?: number;
  /** An enum's values; only for enums. */
  values?: string[];
  /** The most values a list holds (0 or none: 2^20). */
  max_len?: number;
  description?: string;
}

/** What a treatment arm applies at the fork. */
export interface Intervention {
  arm: "on" | "placebo";
  action: string;
  description?: string;
}

export type CostField = "steps" | "tokens" | "usd" | "seconds";

/** The world declaration: everything forklab reads about the agent's runs. */
export interface Declaration {
  /** [a-z][a-z0-9_]*, at most 63 bytes. */
  name: string;
  /** Change it whenever a change of yours changes outcomes. */
  version: string;
  description?: string;
  params?: Param[];
  task?: Field[];
  /** At least one: the pre-decision signals at a checkpoint. */
  features: Field[];
  hidden?: Field[];
  /** A bool hidden field, true when the run had the fault the recovery exists for. */
  fault_flag?: string;
  /** The agent's actions, actions[0] being "no_tool". */
  actions?: string[];
  interventions?: Intervention[];
  /** The cost fields, in the order steps, tokens, usd, seconds; steps is required. */
  cost: { fields: CostField[]; description?: string };
  /** Outcomes vary between identical requests: sweep with replicas. */
  nondeterministic?: boolean;
  /**
   * Paths into start's result that change from run to run and mean nothing
   * (ids, timestamps), which agent check's repeatability comparison ignores:
   * keys joined by ".", "*" for any key, "[N]" or "[*]" for array items, e.g.
   * "forks[*].checkpoint.ts".
   */
  volatile?: string[];
}

/** A cost: the declared cost fields; steps and tokens are integers. */
export interface Cost {
  steps: number;
  tokens?: number;
  usd?: number;
  seconds?: number;
}

/** The sweep's scripted-model settings (--temperature, --no-tool). */
export interface Model {
  temperature: number;
  no_tool: number;
}

/** A parameter's value: as declared. */
export type ParamValue = boolean | number | string | number[];

export interface StartParams {
  seed: Seed;
  /** Fork steps, ascending, each at least 1. */
  fork_steps: number[];
  /** Every declared parameter, defaults filled in, checked by the SDK. */
  params: Record<string, ParamValue>;
  model: Model;
}

/** A checkpoint: any JSON value but null. */
export type Checkpoint = string | number | boolean | bigint | object;

/** A run stopped at a fork step. */
export interface Fork {
  fork_step: number;
  /** The run has ended at the checkpoint: every branch reports its final success. */
  over: boolean;
  checkpoint: Checkpoint;
  features: Values;
  hidden: Values;
  /** What the run cost from its start to the checkpoint. */
  cost: Cost;
}

export interface StartResult {
  /** The task's draws: every declared task field. */
  task: Values;
  /** One per fork step asked, in order. */
  forks: Fork[];
}

export type Arm = "off" | "on" | "placebo" | "aa" | "policy";

/** One branch to finish. */
export interface BranchSpec {
  arm: Arm;
  /** The declared action to apply at the fork, or null. */
  intervention: string | null;
  replica: number;
  /** 16 lowercase hex digits: seed the branch's sampling with it. */
  noise_key: string;
  /** The branch's stable identity, <sweep_id>/<run>/<fork_step>/<arm>/<replica>, from forklab versions that send it. */
  branch_id?: string;
}

export interface BranchParams {
  seed: Seed;
  fork_step: number;
  checkpoint: Checkpoint;
  branches: BranchSpec[];
  /** The sweep's id, from forklab versions that send it. */
  sweep_id?: string;
}

/** A JSON-RPC error object. */
export interface ErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** A branch's outcome, or the error of that branch alone. */
export type BranchOutcome =
  | { success: boolean; cost: Cost; details?: unknown }
  | { error: ErrorObject };

export interface BranchResult {
  /** One per branch asked, in order. */
  branches: BranchOutcome[];
}

export interface FoldParams {
  stream: string;
  offset: string;
  events: unknown[];
}

/** The run a session's events describe: a fork, with its seed; fork_step 0 before any action. */
export interface FoldResult extends Fork {
  seed: Seed;
}

export interface RunsParams {
  /** null for the first page, then the next_cursor of the page before. */
  cursor: string | null;
  /** The most runs to list in this page (a page may hold fewer). */
  limit: number;
}

/** A recorded run the agent can load. */
export interface RunEntry {
  /** Unique among the agent's runs, non-empty: load is asked it, the tables key the run's rows by it. */
  run_id: string;
  /** Anything about the run (a user, a date, a tag): the tasks table's metadata column keeps it. */
  metadata?: unknown;
}

export interface RunsResult {
  /** This page's runs, in a stable order. */
  runs: RunEntry[];
  /** The next page's cursor, null after the last page. */
  next_cursor: string | null;
}

export interface LoadParams {
  run_id: string;
  /** Fork steps, ascending, each at least 1. */
  fork_steps: number[];
  /** Every declared parameter, defaults filled in, checked by the SDK. */
  params: Record<string, ParamValue>;
}

export interface InspectParams {
  checkpoint: Checkpoint;
  /** The step the record says the checkpoint was taken at; null when it does not say. */
  fork_step: number | null;
}

/** What a checkpoint is, computed from it. */
export interface InspectResult {
  over: boolean;
  features: Values;
  hidden: Values;
  cost: Cost;
}

type MaybePromise<T> = T | Promise<T>;

/** An agent: its declaration and the functions that play it. */
export interface AgentDefinition {
  declaration: Declaration;
  /** Play the task of seed to each fork step, as one run. */
  start(params: StartParams): MaybePromise<StartResult>;
  /** Finish branches of one checkpoint. */
  branch(params: BranchParams): MaybePromise<BranchResult>;
  /** Fold a session's events into a checkpoint: declares capabilities.fold. */
  fold?(params: FoldParams): MaybePromise<FoldResult>;
  /** List a page of the recorded runs load hands back (a checkpointer's threads): with load, declares capabilities.runs. */
  runs?(params: RunsParams): MaybePromise<RunsResult>;
  /** Hand back a recorded run as start hands back a seed's: the same result, one fork per step asked. */
  load?(params: LoadParams): MaybePromise<StartResult>;
  /** A checkpoint's over, features, hidden truth and cost: declares capabilities.inspect. */
  inspect?(params: InspectParams): MaybePromise<InspectResult>;
  /** Called on shutdown, before the reply. */
  shutdown?(): MaybePromise<void>;
  /** initialize's agent object (default: the script's name and the declaration's version). */
  agent?: { name: string; version?: string };
  /** capabilities.batch: the most requests taken in one batch line. */
  batch?: number;
  /** Further methods, by name (your own; not the built-in ones): their params and results are checked against METHOD.params and METHOD.result when the bundled schemas have them. */
  methods?: Record<string, (params: Record<string, unknown>) => MaybePromise<unknown>>;
  /** Further capabilities to declare, as the bundled initialize.result schema allows. */
  capabilities?: Record<string, unknown>;
}

/** The request handler createAgent returns. */
export interface Agent {
  readonly declaration: Declaration;
  readonly initializeResult: object;
  /** Answers one request object; null for a notification. */
  handle(request: unknown): Promise<object | null>;
  /** Answers one line (a request or a batch); the reply line without newline, or null. */
  handleLine(line: string): Promise<string | null>;
  /** A shutdown request has been answered. */
  readonly closed: boolean;
}

/** Checks a definition (throws DeclarationError naming the field) and returns its handler. */
export declare function createAgent(def: AgentDefinition): Agent;

/**
 * Serves forklab-agent/1 on stdin and stdout until the end of stdin or a
 * shutdown, then exits. A malformed definition is printed on stderr and the
 * process exits with status 2. stdout carries replies only: console.log
 * goes to stderr.
 */
export declare function serve(def: AgentDefinition): Promise<void>;

/** JSON-RPC and forklab-agent/1 error codes. */
export declare const codes: {
  readonly PARSE_ERROR: -32700;
  readonly INVALID_REQUEST: -32600;
  readonly METHOD_NOT_FOUND: -32601;
  readonly INVALID_PARAMS: -32602;
  readonly INTERNAL_ERROR: -32603;
  readonly RUN_FAILED: -32000;
  readonly BAD_CHECKPOINT: -32001;
  readonly UNSUPPORTED_VERSION: -32002;
};

/** An error reply: throw it from start, branch, fold or a method. */
export declare class AgentError extends Error {
  code: number;
  data?: unknown;
  constructor(code: number, message: string, data?: unknown);
}
/** -32602: a missing or mistyped param; not retried. */
export declare class InvalidParams extends AgentError {
  constructor(message: string, data?: unknown);
}
/** -32001: not a checkpoint of this agent; not retried. */
export declare class BadCheckpoint extends AgentError {
  constructor(message: string, data?: unknown);
}
/** -32000: a failure worth retrying (a model API error); retried. */
export declare class RunFailed extends AgentError {
  constructor(message: string, data?: unknown);
}
/** A malformed definition or declaration; the message names the field. */
export declare class DeclarationError extends Error {}

/** Parses a line of JSON, integers beyond 2^53 as BigInts. */
export declare function parseLine(line: string): unknown;
/** Writes a value as a line of JSON (no newline), BigInts as JSON numbers. */
export declare function stringifyLine(value: unknown): string;
