#!/usr/bin/env node
// timetravel.mjs — the experiment `forklab sweep --agent 'node agent.mjs'`
// runs, done instead with LangGraph's own time travel in this one process:
// each seed's run played to its end in a thread, the checkpoint at the fork
// step found in getStateHistory, and each arm forked from it in the same
// thread: updateState(…, "__copy__") copies it without its pending writes,
// updateState(…, END) cancels the step it was about to run, and invoke
// plays on (invoke(Command({goto: node})) for an intervention). It prints one JSON object: the seeds, pairs,
// seconds, pairs/s and each arm's label counts against off, which must be
// forklab's (make bench-agent compares them).
//
//   node timetravel.mjs --seeds 0:1000 --fork-at 2 --arms off,on,placebo,aa

import { parseArgs } from "node:util";
import { MemorySaver, Command, END } from "@langchain/langgraph";
import { buildGraph, input, newEnv, solved } from "./graph.mjs";

const { values: flags } = parseArgs({ options: { seeds: { type: "string", default: "0:100" }, "fork-at": { type: "string", default: "2" }, arms: { type: "string", default: "off,on,placebo,aa" } } });
const [from, to] = flags.seeds.split(":").map(Number);
const k = Number(flags["fork-at"]);
const arms = flags.arms.split(",");
const node = { on: "recheck", placebo: "think" };
const params = { p_synonym: 0.5, p_tool_error: 0.15, max_turns: 4, max_orders: 4, temperature: 0 };

const saver = new MemorySaver();
const graph = buildGraph(saver);
const labels = Object.fromEntries(arms.filter((a) => a !== "off").map((a) => [a, { rescued: 0, harmed: 0, unchanged: 0 }]));
const t0 = performance.now();
for (let seed = from; seed < to; seed++) {
  const thread = { configurable: { thread_id: `seed-${seed}` } };
  await graph.invoke(input(newEnv(seed, params)), thread);
  // The history, oldest first: the fork is the state before the step
  // (agent) runs for the (k+1)-th time, or the end of a run over before it.
  const history = [];
  for await (const s of graph.getStateHistory(thread)) history.unshift(s);
  const before = history.filter((s) => s.next.includes("agent"));
  const fork = before[k] ?? history.at(-1);
  const over = fork.next.length === 0;
  const success = {};
  for (const arm of arms) {
    const forklab = { noise: `${seed}/${arm}` };
    let end = fork;
    if (!over) {
      // A copy of the checkpoint without its pending writes (the original
      // run's next step, which updateState(…, END) would apply).
      let at = await graph.updateState(fork.config, null, "__copy__");
      if (node[arm]) {
        at = await graph.updateState(at, null, END);
        await graph.invoke(new Command({ goto: node[arm] }), { configurable: { ...at.configurable, forklab } });
      } else {
        await graph.invoke(null, { configurable: { ...at.configurable, forklab } });
      }
      end = await graph.getState(thread);
    }
    success[arm] = solved(end.values);
  }
  for (const arm of Object.keys(labels)) {
    const l = labels[arm];
    if (success[arm] && !success.off) l.rescued++;
    else if (!success[arm] && success.off) l.harmed++;
    else l.unchanged++;
  }
  await saver.deleteThread(thread.configurable.thread_id);
}
const seconds = (performance.now() - t0) / 1000;
const pairs = (to - from) * Object.keys(labels).length;
console.log(JSON.stringify({ seeds: to - from, pairs, seconds: Number(seconds.toFixed(3)), pairs_per_s: Number((pairs / seconds).toFixed(2)), labels }));
