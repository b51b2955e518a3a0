// replay.mjs: one stream of the forklab session log, replayed from its
// Kafka records with kafkajs, as the HTTP API reads it.
//
//   npm ci --prefix stream/replay
//   node stream/replay/replay.mjs --brokers 127.0.0.1:9092 --stream NAME \
//     [--topic forklab.streams] [--partition P] [--from OFFSET]
//
// --partition is HEAD's Forklab-Kafka-Partition (default 0). Output on
// stdout: exactly what the API reads (GET ?offset=OFFSET, all chunks
// joined), from OFFSET (an offset the API returned, as it returned it) or
// from the beginning: the stream's bytes, or for a JSON stream one JSON
// array of its messages, each as its appender wrote it. Values are
// Buffers: binary streams come out byte for byte. A deleted stream is an
// error (exit 1), bad flags exit 2.
//
// The fold is the service's own (stream/kafkalog: rebuild.go Log.apply,
// state.go wstate.fold and refusal, create.go, delete.go; replay.go
// kafkalog.Replay runs the same rules in Go), applied to the partition's
// records in offset order:
//
//   1. Generations. forklab-gen tells a stream's generations apart: a
//      create of a newer generation replaces the stream, records of any
//      other generation are ignored, a delete ends it.
//   2. Record numbers. forklab-rec numbers a generation's records (0 for
//      the create). A number the generation has passed is a copy (a
//      produce retried, or a write the service gave up on that landed
//      after its retry) and is ignored, except that a copy of the
//      generation's latest record moves that record to the copy.
//   3. Refusals. An append or close that landed late is refused when the
//      stream is closed, when its producer seq was already accepted
//      (same producer id and epoch, seq not higher), when its producer
//      epoch is stale, or when its Stream-Seq is not higher than the last
//      one. A refused record adds nothing but uses up its number.
//   4. Forks. A create with stream-forked-from starts with the records of
//      its source below the fork offset, plus the first n bytes (of the
//      inner JSON text, for a JSON stream) of the record forklab-fork-cut
//      "K:n" names.
//   5. Deletes. A stream that forks still inherit from is soft-deleted:
//      gone to readers, kept for forks whose create lands later; it goes
//      for good with its last fork.
//   6. Retention. A stream whose create record retention removed goes on
//      from its first record left.
//   7. A newer generation ends the current one. A record of a generation
//      newer than the stream's (its create removed by retention) means
//      the stream's generation is over, though no delete of it is left
//      in the partition: it is deleted as by rule 5 and the record's
//      generation goes on (rule 6). A delete of a generation never seen
//      still counts as one.
//
// Each rule is marked below with where the Go code holds it.
import { realpathSync } from "node:fs"
import { fileURLToPath } from "node:url"
import { Kafka, logLevel } from "kafkajs"

// parseOffset reads an offset the API issued (stream/kafkalog/offset.go
// ParseOffset): PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO (the bare form) or, as
// the API returns them, stamped PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO_G_CCCCCCCC:
// partition, Kafka offset, generation and check. It returns the partition
// and the Kafka offset, or null for text that is not an offset. The stamp
// ties an offset to its stream; the API checks it, the recipe does not.
export function parseOffset(s) {
  const m = /^(\d{16})_(\d{16})(?:_[1-9]\d{0,18}_[0-9a-f]{8})?$/.exec(s ?? "")
  return m ? { partition: Number(m[1]), pos: Number(m[2]) } : null
}

const isJSON = (ct) => /^\s*application\/json\s*(;|$)/i.test(ct ?? "")
const int = (s) => (s !== undefined && /^[+-]?\d+$/.test(s) ? Number(s) : undefined)

// decode reads a record's headers (record.go decodeRecord). It returns
// null for a record that is not the log's (no forklab-op, -gen or -rec)
// or whose numeric headers do not parse: the service skips those too.
export function decode(m) {
  const h = {}
  for (const [k, v] of Object.entries(m.headers ?? {})) {
    const last = Array.isArray(v) ? v[v.length - 1] : v // a repeated header: the last one counts
    h[k] = Buffer.isBuffer(last) ? last : Buffer.from(String(last ?? ""))
  }
  const str = (k) => h[k]?.toString()
  const r = {
    koff: Number(m.offset),
    op: str("forklab-op"),
    stream: str("forklab-stream") || m.key?.toString() || "",
    gen: int(str("forklab-gen")),
    rec: int(str("forklab-rec")),
    contentType: str("content-type") ?? "",
    value: m.value ?? Buffer.alloc(0),
    closed: str("stream-closed") === "true",
    producer: null,
    streamSeq: h["stream-seq"] ?? Buffer.alloc(0), // compared byte-wise, as Go compares strings
    forkedFrom: str("stream-forked-from") ?? "",
    forkGen: 0,
    forkOffset: str("stream-fork-offset") ?? "",
    forkCut: null,
  }
  if (!r.op || r.gen === undefined || r.rec === undefined) return null
  if (h["producer-id"] && h["producer-epoch"] && h["producer-seq"]) {
    const epoch = int(str("producer-epoch")), seq = int(str("producer-seq"))
    if (epoch === undefined || seq === undefined) return null
    r.producer = { id: str("producer-id"), epoch, seq }
  }
  if (h["forklab-fork-gen"] !== undefined) {
    r.forkGen = int(str("forklab-fork-gen"))
    if (r.forkGen === undefined) return null
  }
  if (h["forklab-fork-cut"] !== undefined) {
    const c = /^([+-]?\d+):([+-]?\d+)/.exec(str("forklab-fork-cut"))
    if (!c) return null
    r.forkCut = { koff: Number(c[1]), bytes: Number(c[2]) }
  }
  return r
}

// Fold is the state the records build, as Log (and kafkalog.Replay) keeps
// it: the stream generation current under each name, and per name the
// highest generation seen and the highest one deleted for good.
export class Fold {
  constructor() {
    this.streams = new Map() // name → generation (below)
    this.gens = new Map()
    this.removed = new Map()
  }

  // apply folds one record (a kafkajs message) of the partition, in
  // offset order (rebuild.go Log.apply).
  apply(m) {
    const r = decode(m)
    if (r === null) return
    if (r.op === "create") return this.create(r)
    let s = this.streams.get(r.stream)
    if (s !== undefined && r.gen > s.gen) {
      // Rule 7 (rebuild.go supersede): the current generation is over.
      if (!s.soft) this.delete(s)
      s = undefined
    }
    if (s === undefined && r.op !== "delete" && this.adoptable(r)) s = this.adopt(r) // rule 6
    if (s === undefined && r.op === "delete") {
      // Rule 7 (rebuild.go noteRemoved): a generation deleted, never seen.
      this.removed.set(r.stream, Math.max(r.gen, this.removed.get(r.stream) ?? 0))
    }
    if (s === undefined || s.gen !== r.gen) return // rule 1: not the current generation
    switch (fold(s, r)) {
      case "copy of latest":
        moveCopy(s, r.rec, r.koff)
        break
      case "taken":
        if (r.op === "delete") this.delete(s)
        else if (r.value.length > 0) s.entries.push({ koff: r.koff, rec: r.rec, value: r.value, cut: -1 })
        break
    }
  }

  // create folds a create record (create.go applyCreate, installCreate).
  create(r) {
    const existing = this.streams.get(r.stream)
    if (existing !== undefined && existing.gen === r.gen) {
      // Rule 2: a second copy of the create.
      if (fold(existing, r) === "copy of latest") moveCopy(existing, 0, r.koff)
      return
    }
    // Rule 1: an older generation than the stream's, or one deleted.
    if ((existing !== undefined && existing.gen > r.gen) || r.gen <= (this.removed.get(r.stream) ?? 0)) return
    const s = generation(r.stream, r.gen, r.contentType, 1)
    s.closed = r.closed
    if (r.forkedFrom !== "") {
      // Rule 4. The source is the current generation of its name, if it is
      // the one the fork was made from (soft-deleted ones included); else
      // the fork inherits nothing.
      const src = this.streams.get(r.forkedFrom)
      if (src !== undefined && src.gen === r.forkGen) {
        // The fork point (position.go forkPoint): the records below the
        // Kafka offset of stream-fork-offset; all of them (below the
        // source's tail) when it does not parse.
        const at = parseOffset(r.forkOffset)?.pos ?? Infinity
        const below = src.entries.filter((e) => e.koff < at)
        s.entries = below.map((e) => ({ ...e }))
        const next = src.entries[below.length]
        if (r.forkCut !== null && r.forkCut.bytes >= 0 && next !== undefined && next.koff === r.forkCut.koff) {
          s.entries.push({ ...next, cut: r.forkCut.bytes })
        }
        s.source = src
        src.refs++
      }
    }
    s.own = s.entries.length
    if (r.value.length > 0) s.entries.push({ koff: r.koff, rec: 0, value: r.value, cut: -1 })
    this.streams.set(r.stream, s)
    this.gens.set(r.stream, Math.max(r.gen, this.gens.get(r.stream) ?? 0))
  }

  // delete ends a generation (rule 5; delete.go applyDelete).
  delete(s) {
    if (s.refs > 0) {
      s.soft = true
      return
    }
    while (s !== null) {
      s.soft = false
      if (this.streams.get(s.name) === s) this.streams.delete(s.name)
      this.removed.set(s.name, Math.max(s.gen, this.removed.get(s.name) ?? 0))
      const src = s.source
      s = null
      if (src !== null) {
        src.refs--
        if (src.soft && src.refs === 0) s = src
      }
    }
  }

  // adoptable and adopt: rule 6 (rebuild.go adoptable, adoptTrimmed).
  adoptable(r) {
    return r.gen >= (this.gens.get(r.stream) ?? 0) && r.gen > (this.removed.get(r.stream) ?? 0)
  }

  adopt(r) {
    const s = generation(r.stream, r.gen, r.contentType, r.rec)
    this.streams.set(r.stream, s)
    this.gens.set(r.stream, Math.max(r.gen, this.gens.get(r.stream) ?? 0))
    return s
  }

  // bytes renders a stream from Kafka offset `from` on (-1: the
  // beginning) as the API reads it, or null when the stream is not in
  // the partition or was deleted.
  bytes(name, from) {
    const s = this.streams.get(name)
    if (s === undefined || s.soft) return null
    const parts = []
    for (const e of s.entries) {
      if (e.koff < from) continue
      let v = s.json ? inner(e.value) : e.value
      if (e.cut >= 0) v = v.subarray(0, e.cut)
      if (!s.json || v.length > 0) parts.push(v)
    }
    if (!s.json) return Buffer.concat(parts)
    const out = [Buffer.from("[")]
    parts.forEach((p, i) => out.push(...(i > 0 ? [Buffer.from(","), p] : [p])))
    out.push(Buffer.from("]"))
    return Buffer.concat(out)
  }
}

// generation is a new stream generation: its write state (state.go wstate:
// the next record number, producers, Stream-Seq, closed; soft deletion and
// the forks that inherit from it) and its records, [{koff, rec, value,
// cut}] in offset order, the first `own` of them inherited from `source`.
function generation(name, gen, contentType, next) {
  return {
    name, gen, json: isJSON(contentType), next, producers: new Map(), streamSeq: Buffer.alloc(0),
    closed: false, soft: false, refs: 0, source: null, own: 0, entries: [],
  }
}

// fold decides record r of generation s (state.go wstate.fold) and folds
// its number, and its append or close when taken, into s: "copy", "copy
// of latest", "refused", "taken" or "unknown" (an operation this recipe
// does not know: nothing changes).
function fold(s, r) {
  if (r.rec < s.next) return r.rec === s.next - 1 ? "copy of latest" : "copy" // rule 2
  if (r.op === "append" || r.op === "close") {
    s.next = r.rec + 1 // taken or refused, the record uses up its number
    if (refused(s, r)) return "refused"
    // Taken (state.go wstate.apply; fence.Replay).
    if (r.producer !== null) s.producers.set(r.producer.id, { epoch: r.producer.epoch, seq: r.producer.seq })
    if (r.streamSeq.length > 0) s.streamSeq = r.streamSeq
    if (r.closed) s.closed = true
    return "taken"
  }
  if (r.op === "delete") {
    s.next = r.rec + 1
    return "taken"
  }
  return "unknown"
}

// refused is rule 3 (state.go wstate.refusal; the producer rules are
// stream/fence Decide's StaleEpoch and Duplicate verdicts).
function refused(s, r) {
  if (s.closed) return true // RefusedClosed
  if (r.producer !== null) {
    const p = s.producers.get(r.producer.id)
    if (p !== undefined && r.producer.epoch < p.epoch) return true // RefusedStaleEpoch
    if (p !== undefined && r.producer.epoch === p.epoch && r.producer.seq <= p.seq) return true // RefusedDuplicate
  }
  // RefusedStreamSeq: byte-wise, as the service compares Stream-Seq.
  return r.streamSeq.length > 0 && s.streamSeq.length > 0 && Buffer.compare(r.streamSeq, s.streamSeq) <= 0
}

// moveCopy moves the generation's own record number rec to the copy at
// Kafka offset koff (rule 2; state.go moveDuplicate). Records a fork
// inherited stay where they were.
function moveCopy(s, rec, koff) {
  for (const e of s.entries.slice(s.own)) if (e.rec === rec && koff > e.koff) e.koff = koff
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

// readPartition folds every record of a partition, from its log start to
// its high watermark as of now, with a consumer of a group of its own
// that commits nothing.
export async function readPartition(brokers, topic, partition) {
  const kafka = new Kafka({ clientId: "forklab-replay", brokers, logLevel: logLevel.NOTHING })
  const admin = kafka.admin()
  await admin.connect()
  const offsets = await admin.fetchTopicOffsets(topic)
  await admin.disconnect()
  const po = offsets.find((o) => o.partition === partition)
  if (!po) throw new UsageError(`topic ${topic} has no partition ${partition}`)
  const high = Number(po.high)
  const fold = new Fold()
  if (high <= Number(po.low)) return fold
  const consumer = kafka.consumer({ groupId: `forklab-replay-${process.pid}-${Date.now()}` })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
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
  return fold
}

// UsageError is bad input: exit 2.
export class UsageError extends Error {}

function args(argv) {
  const a = { topic: "forklab.streams", partition: "0", from: "" }
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "")
    if (!(k in a) && k !== "brokers" && k !== "stream") throw new UsageError(`unknown flag ${argv[i]}`)
    if (i + 1 >= argv.length) throw new UsageError(`${argv[i]} needs a value`)
    a[k] = argv[i + 1]
  }
  if (!a.brokers || !a.stream) throw new UsageError("give --brokers and --stream")
  if (!/^\d+$/.test(a.partition)) throw new UsageError(`--partition ${a.partition}: want a partition number`)
  a.partition = Number(a.partition)
  a.from = startOf(a.from, a.partition)
  return a
}

// startOf is the Kafka offset a read from `from` (an offset the API
// returned, -1 or "" for the beginning) starts at in partition `partition`.
export function startOf(from, partition) {
  if (from === "" || from === "-1") return -1
  const o = parseOffset(from)
  if (o === null) throw new UsageError(`--from ${from}: not an offset the API returned (PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO_G_CCCCCCCC) or -1`)
  if (o.partition !== partition) throw new UsageError(`--from ${from} is an offset of partition ${o.partition}: give --partition ${o.partition}`)
  return o.pos
}

async function main() {
  const a = args(process.argv.slice(2))
  const fold = await readPartition(a.brokers.split(","), a.topic, a.partition)
  const out = fold.bytes(a.stream, a.from)
  // Exit once the output is written: kafkajs leaves timers behind that
  // would keep the process alive for a while.
  if (out === null) {
    process.stderr.write(
      `replay.mjs: stream ${a.stream} is not in partition ${a.partition}: deleted, or in another partition (HEAD shows Forklab-Kafka-Partition)\n`,
      () => process.exit(1),
    )
  } else {
    process.stdout.write(out, () => process.exit(0))
  }
}

// Run as a program (not when imported, as the test does).
if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    const usage = err instanceof UsageError
    process.stderr.write(
      `replay.mjs: ${err.message}\n` +
        (usage ? "usage: node replay.mjs --brokers HOST:PORT --stream NAME [--topic T] [--partition P] [--from OFFSET]\n" : ""),
      () => process.exit(usage ? 2 : 1),
    )
  })
}
