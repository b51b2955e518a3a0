// Starts the reference Durable Streams server (@durable-streams/server) for
// the benchmark: node reference-server.mjs PORT [DATA_DIR]. With DATA_DIR it
// is file-backed, without it in memory.
import { DurableStreamTestServer } from "@durable-streams/server"

const port = Number(process.argv[2] ?? 4438)
const dataDir = process.argv[3]
const server = new DurableStreamTestServer({ port, host: "127.0.0.1", dataDir: dataDir || undefined })
await server.start()
console.log(`reference server listening on http://127.0.0.1:${port} (${dataDir ? "file-backed in " + dataDir : "in memory"})`)
const stop = async () => {
  await server.stop()
  process.exit(0)
}
process.on("SIGTERM", stop)
process.on("SIGINT", stop)
