// replay.mjs: one stream of the forklab session log, replayed from its
// Kafka records with kafkajs, as the HTTP API reads it.
//
//   npm ci --prefix stream/replay
//   node stream/replay/replay.mjs --brokers 127.0.0.1:9092 --stream NAME \
//     [--topic forklab.streams] [--partition P] [--from OFFSET]
//
// --partition is HEAD's Forklab-Kafka-Partition (default 0). Output on
// stdout: exactly what the API reads (GET ?offset=OFFSET, all chunks
// joined), from OFFSET (an offset the API returned) or from the beginning:
// the stream's bytes, or for a JSON stream one JSON array of its messages,
// each as its appender wrote it. The fold is the one replay.jq documents and stream/kafkalog
// runs on start: only the stream's current generation (forklab-gen), a
// second copy of a record (forklab-rec seen before) replaces the first, a
// fork starts with its source's records before the fork offset and the
// part of the record a sub-offset cuts. Values are Buffers: binary streams
// come out byte for byte.
import { Kafka, logLevel } from "kafkajs"

function args(argv) {
  const a = { topic: "forklab.streams", partition: "0", from: "" }
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "")
    if (!(k in a) && k !== "brokers" && k !== "stream") usage(`unknown flag ${argv[i]}`)
    if (i + 1 >= argv.length) usage(`${argv[i]} needs a value`)
    a[k] = argv[i + 1]
  }
  if (!a.brokers || !a.stream) usage("give --brokers and --stream")
  return a
}

function usage(msg) {
  process.stderr.write(`replay.mjs: ${msg}\nusage: node replay.mjs --brokers HOST:PORT --stream NAME [--topic T] [--partition P] [--from OFFSET]\n`)
  process.exit(2)
}

// kafkaOffset is the Kafka offset in an offset token (its second field).
const kafkaOffset = (o) => Number(o.split("_")[1])

const isJSON = (ct) => /^\s*application\/json\s*(;|$)/i.test(ct ?? "")

// Fold is the state the records build: streams by name (their current
// generation), the highest generation deleted and seen per name.
class Fold {
  constructor() {
    this.s = new Map()
    this.rm = new Map()
    this.seen = new Map()
  }

  apply(m) {
    const h = {}
    for (const [k, v] of Object.entries(m.headers ?? {})) h[k] = Buffer.isBuffer(v) ? v.toString() : String(v)
    if (h["forklab-op"] === undefined || h["forklab-gen"] === undefined) return
    const n = h["forklab-stream"] ?? m.key?.toString()
    const g = Number(h["forklab-gen"])
    const rec = Number(h["forklab-rec"])
    const op = h["forklab-op"]
    const k = Number(m.offset)
    const v = m.value ?? Buffer.alloc(0)
    let cur = this.s.get(n)
    if (op === "create") {
      if (cur && cur.gen === g) {
        for (const e of cur.entries) if (e.own && e.rec === 0) e.k = k
        return
      }
      if ((cur && cur.gen > g) || g <= (this.rm.get(n) ?? 0)) return
      let inherited = []
      const from = h["stream-forked-from"]
      if (from !== undefined) {
        const src = this.s.get(from)
        if (src && src.gen === Number(h["forklab-fork-gen"])) {
          const fp = kafkaOffset(h["stream-fork-offset"])
          inherited = src.entries.filter((e) => e.k < fp).map((e) => ({ ...e, own: false }))
          if (h["forklab-fork-cut"] !== undefined) {
            const ck = Number(h["forklab-fork-cut"].split(":")[0])
            const cn = Number(h["forklab-fork-cut"].split(":")[1])
            for (const e of src.entries) if (e.k === ck) inherited.push({ ...e, own: false, cut: cn })
          }
        }
      }
      const entries = inherited
      if (v.length > 0) entries.push({ k, v, rec: 0, own: true, cut: null })
      this.s.set(n, { gen: g, json: isJSON(h["content-type"]), next: 1, entries })
      this.seen.set(n, Math.max(g, this.seen.get(n) ?? 0))
      return
    }
    // A stream whose create record retention dropped goes on from here.
    if (!cur && op !== "delete" && g > (this.rm.get(n) ?? 0) && g >= (this.seen.get(n) ?? 0)) {
      cur = { gen: g, json: isJSON(h["content-type"]), next: rec, entries: [] }
      this.s.set(n, cur)
      this.seen.set(n, g)
    }
    if (!cur || cur.gen !== g) return
    if (rec < cur.next) {
      for (const e of cur.entries) if (e.own && e.rec === rec) e.k = k
      return
    }
    if (op === "delete") {
      this.rm.set(n, g)
      this.s.delete(n)
      return
    }
    if (v.length > 0) cur.entries.push({ k, v, rec, own: true, cut: null })
    cur.next = rec + 1
  }

  // bytes renders a stream from Kafka offset `from` on, as the API reads it.
  bytes(name, from) {
    const s = this.s.get(name)
    if (!s) return null
    const parts = []
    for (const e of s.entries) {
      if (e.k < from) continue
      let v = s.json ? inner(e.v) : e.v
      if (e.cut !== null) v = v.subarray(0, e.cut)
      if (!s.json || v.length > 0) parts.push(v)
    }
    if (!s.json) return Buffer.concat(parts)
    const out = [Buffer.from("[")]
    parts.forEach((p, i) => out.push(...(i > 0 ? [Buffer.from(","), p] : [p])))
    out.push(Buffer.from("]"))
    return Buffer.concat(out)
  }
}

// inner is the text a JSON record contributes to a read, as
// stream/kafkalog's jsonInner: the elements of a top-level array without
// its brackets (the protocol flattens one level), or the value itself.
function inner(v) {
  const ws = (c) => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d
  const trim = (b) => {
    let i = 0, j = b.length
    while (i < j && ws(b[i])) i++
    while (j > i && ws(b[j - 1])) j--
    return b.subarray(i, j)
  }
  const t = trim(v)
  return t.length >= 2 && t[0] === 0x5b ? trim(t.subarray(1, t.length - 1)) : t
}

const a = args(process.argv.slice(2))
const partition = Number(a.partition)
const from = a.from === "" || a.from === "-1" ? -1 : kafkaOffset(a.from)
const kafka = new Kafka({ clientId: "forklab-replay", brokers: a.brokers.split(","), logLevel: logLevel.NOTHING })
const admin = kafka.admin()
await admin.connect()
const offsets = await admin.fetchTopicOffsets(a.topic)
await admin.disconnect()
const po = offsets.find((o) => o.partition === partition)
if (!po) usage(`topic ${a.topic} has no partition ${partition}`)
const high = Number(po.high)
const fold = new Fold()
if (high > Number(po.low)) {
  // A consumer of its own group, not committing: it reads the partition
  // from the beginning to the high watermark as of now.
  const consumer = kafka.consumer({ groupId: `forklab-replay-${process.pid}-${Date.now()}` })
  await consumer.connect()
  await consumer.subscribe({ topic: a.topic, fromBeginning: true })
  await new Promise((resolve, reject) => {
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ partition: p, message }) => {
          if (p !== partition) return
          fold.apply(message)
          if (Number(message.offset) >= high - 1) resolve()
        },
      })
      .catch(reject)
  })
  await consumer.disconnect()
}
const out = fold.bytes(a.stream, from)
// Exit once the output is written: kafkajs leaves timers behind that would
// keep the process alive for a while.
if (out === null) {
  process.stderr.write(
    `replay.mjs: stream ${a.stream} is not in partition ${partition}: deleted, or in another partition (HEAD shows Forklab-Kafka-Partition)\n`,
    () => process.exit(1),
  )
} else {
  process.stdout.write(out, () => process.exit(0))
}
