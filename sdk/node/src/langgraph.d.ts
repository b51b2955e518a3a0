// Types of @forklab/agent/langgraph (docs/sdk-node.md, "LangGraph").

import type { AgentDefinition, Cost, Declaration, Model, ParamValue, Seed, Values } from "./index.js";

/** The compiled LangGraph graph, as the adapter uses it. */
export interface GraphLike {
  invoke(input: unknown, config?: any): Promise<unknown>;
  getState(config: any): Promise<{ values: any; next: string[]; config: any; tasks?: any[] }>;
  getStateHistory?(config: any, options?: any): AsyncIterable<{ values: any; next: string[]; config: any; metadata?: any }>;
  updateState(config: any, values: unknown, asNode?: string): Promise<any>;
  nodes: Record<string, unknown>;
  checkpointer?: any;
  builder?: any;
}

/** The checkpointer, as the adapter uses it (LangGraph's BaseCheckpointSaver). */
export interface CheckpointerLike {
  put(config: any, checkpoint: any, metadata: any, newVersions: any): Promise<any>;
  getTuple(config: any): Promise<any>;
  list?(config: any, options?: any): AsyncIterable<any>;
  deleteThread?(threadId: string): Promise<void>;
  serde: {
    dumpsTyped(value: any): Promise<[string, Uint8Array | string]> | [string, Uint8Array | string];
    loadsTyped(type: string, data: Uint8Array | string): Promise<any> | any;
  };
}

/** What a node finds in config.configurable.forklab while the adapter plays a run. */
export interface ForklabConfig {
  seed: Seed;
  /** Seed the run's sampling with it: "seed:<seed>" before the fork, the branch's noise key after. */
  noise: string;
  /** In start: the declared parameters and the sweep's model settings. */
  params?: Record<string, ParamValue>;
  model?: Model;
  /** In branch: */
  fork_step?: number;
  arm?: string;
  replica?: number;
  noise_key?: string;
  branch_id?: string | null;
}

/** A recorded thread: its id (the run's run_id) and its metadata. */
export interface RecordedThread {
  thread_id: string;
  metadata?: unknown;
}

/** Where the recorded runs live: forklab sweep --runs agent: forks their threads. */
export interface RecordedOptions {
  /** The checkpointer holding the recorded threads (a SqliteSaver, a PostgresSaver). Default: the adapter's own. */
  checkpointer?: CheckpointerLike;
  /** The threads to list. Default: every thread of the checkpointer (its root namespace; not the adapter's forklab/… threads). */
  threads?(): MaybePromise<Iterable<string | RecordedThread> | AsyncIterable<string | RecordedThread>>;
  /** A listed thread's metadata. Default: its oldest checkpoint's metadata beyond LangGraph's own keys (source, step, parents, writes), if any. */
  metadata?(threadId: string, checkpointMetadata: any): unknown;
}

type MaybePromise<T> = T | Promise<T>;

export interface LangGraphOptions<S = any> {
  declaration: Declaration;
  /** The compiled graph. */
  graph: GraphLike;
  /** Default: the graph's own (graph.compile({ checkpointer })). */
  checkpointer?: CheckpointerLike;
  /** The graph's input for a seed: the environment included, for it must live in the graph's state. */
  input(run: { seed: Seed; params: Record<string, ParamValue>; model: Model }): unknown;
  /** The node (or nodes) whose runs are steps. Default: the node START leads to, the model's turn. */
  step?: string | string[];
  /** The node each declared intervention action routes to. Default: the node named as the action. */
  interventions?: Record<string, string>;
  /** The task's draws, from the state before the first step. */
  task?(state: S): Values;
  /** The features at a checkpoint: what an observer sees before deciding to recover. */
  features(state: S): Values;
  hidden?(state: S): Values;
  /** The cost from the run's start to this state; a branch is charged the difference. */
  cost(state: S): Cost;
  /** Whether the run at its end met the task's goal. */
  success(state: S): boolean;
  /** The branch's details (beside thread_id, which the adapter adds). */
  details?(state: S): unknown;
  /** Makes more of a checkpoint canonical, in place (fields beyond ids, timestamps, message and tool-call ids). */
  canonical?(checkpoint: any): void;
  /** Keep the threads the adapter plays (default: only with a checkpointer other than MemorySaver). */
  keepThreads?: boolean;
  /** Recorded threads to fork: the definition then has runs and load (capabilities.runs). */
  recorded?: RecordedOptions | true;
  /** LangGraph's recursionLimit for each invoke. */
  recursionLimit?: number;
  agent?: AgentDefinition["agent"];
  batch?: number;
}

/** A LangGraph graph as an agent definition for serve(). */
export declare function langgraph<S = any>(options: LangGraphOptions<S>): AgentDefinition;

/** Makes a checkpoint (the JSON form of LangGraph's own) canonical, in place, and returns it. */
export declare function canonicalize(checkpoint: any, forkStep: number): any;
/** The id of a canonical checkpoint at a fork step. */
export declare function canonicalId(forkStep: number): string;
/** The timestamp of a canonical checkpoint. */
export declare const CANONICAL_TS: string;
