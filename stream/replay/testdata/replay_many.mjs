// replay_many.mjs is replay.mjs for many reads at once, for its test: it
// reads one partition once with replay.mjs's own reader and fold, then for
// each job on stdin (JSON lines {"stream": NAME, "from": OFFSET}) prints
// what `node replay.mjs --stream NAME --from OFFSET` prints, as one JSON
// line: {"out": BASE64} or {"err": MESSAGE}.
//
//   node testdata/replay_many.mjs BROKERS TOPIC PARTITION < jobs
import { readFileSync } from "node:fs"
import { readPartition, startOf } from "../replay.mjs"

const [brokers, topic, partition] = process.argv.slice(2)
const jobs = readFileSync(0, "utf8").split("\n").filter((l) => l !== "").map((l) => JSON.parse(l))
const fold = await readPartition(brokers.split(","), topic, Number(partition))
const lines = jobs.map(({ stream, from }) => {
  try {
    const out = fold.bytes(stream, startOf(from, Number(partition)))
    return JSON.stringify(out === null ? { err: `stream ${stream} is not in partition ${partition}` } : { out: out.toString("base64") })
  } catch (err) {
    return JSON.stringify({ err: err.message })
  }
})
process.stdout.write(lines.join("\n") + "\n", () => process.exit(0))
