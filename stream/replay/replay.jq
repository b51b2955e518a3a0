# replay.jq: one stream of the forklab session log, replayed from its Kafka
# records as the HTTP API reads it. Input: kcat -J, one JSON object per
# record of the stream's partition, from the beginning, in offset order.
#
#   kcat -C -b BROKER -t forklab.streams -p PARTITION -o beginning -e -q -J |
#     jq -n -j --arg stream NAME [--arg from OFFSET] -f stream/replay/replay.jq
#
# PARTITION is HEAD's Forklab-Kafka-Partition. Output: exactly what the
# API reads (GET ?offset=OFFSET, all chunks joined), from OFFSET (an offset
# the API returned, as it returned it) or from the beginning: the stream's
# bytes, or for a JSON stream one JSON array of its messages, each as its
# appender wrote it. Values are printed whole, newlines and tabs included.
# A deleted stream is an error (exit 5) and prints nothing.
#
# The fold is the service's own (stream/kafkalog: rebuild.go Log.apply,
# state.go wstate.fold and refusal, create.go, delete.go; replay.go
# kafkalog.Replay runs the same rules in Go), applied to the partition's
# records in offset order:
#
#   1. Generations. forklab-gen tells a stream's generations apart: a
#      create of a newer generation replaces the stream, records of any
#      other generation are ignored, a delete ends it.
#   2. Record numbers. forklab-rec numbers a generation's records (0 for
#      the create). A number the generation has passed is a copy (a
#      produce retried, or a write the service gave up on that landed
#      after its retry) and is ignored, except that a copy of the
#      generation's latest record moves that record to the copy.
#   3. Refusals. An append or close that landed late is refused when the
#      stream is closed, when its producer seq was already accepted
#      (same producer id and epoch, seq not higher), when its producer
#      epoch is stale, or when its Stream-Seq is not higher than the last
#      one. A refused record adds nothing but uses up its number.
#   4. Forks. A create with stream-forked-from starts with the records of
#      its source below the fork offset, plus the first n bytes (of the
#      inner JSON text, for a JSON stream) of the record forklab-fork-cut
#      "K:n" names.
#   5. Deletes. A stream that forks still inherit from is soft-deleted:
#      gone to readers, kept for forks whose create lands later; it goes
#      for good with its last fork.
#   6. Retention. A stream whose create record retention removed goes on
#      from its first record left.
#   7. A newer generation ends the current one. A record of a generation
#      newer than the stream's (its create removed by retention) means
#      the stream's generation is over, though no delete of it is left
#      in the partition: it is deleted as by rule 5 and the record's
#      generation goes on (rule 6). A delete of a generation never seen
#      still counts as one.
#
# Each rule is marked below with where the Go code holds it. Limits: jq
# holds the partition's live streams in memory, and decodes values as UTF-8
# text: a value that is not UTF-8 (binary streams), or a sub-offset that
# cuts a multi-byte character, is an error naming replay.mjs, never wrong
# bytes; producer epochs and seqs are exact up to 2^53.

# The state, folded record by record:
#   {streams: {name: id of its current generation},
#    g: {id: generation},                 id: "GEN NAME"
#    gens: {name: highest generation seen},
#    removed: {name: highest generation deleted for good}}
# A generation is its write state (state.go wstate) and its records:
#   {name, gen, json, next (record number), producers: {id: {epoch, seq}},
#    seq (Stream-Seq), closed, soft, refs (forks inheriting from it),
#    source (id), own, entries: [{k (Kafka offset), v, rec, cut}]}
# where the first `own` entries are the ones a fork inherited.

# An offset the API issued (stream/kafkalog/offset.go ParseOffset), bare
# PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO or, as the API returns them, stamped
# PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO_G_CCCCCCCC (partition, Kafka offset,
# generation, check): {partition, pos}, or null for text that is not one.
# The stamp ties an offset to its stream; the API checks it, this does not.
def offset:
  if type == "string" and test("^[0-9]{16}_[0-9]{16}(_[1-9][0-9]{0,18}_[0-9a-f]{8})?$")
  then {partition: (.[0:16] | tonumber), pos: (.[17:33] | tonumber)}
  else null end;

def int: if type == "string" and test("^[+-]?[0-9]+$") then tonumber else null end;

def isjson: test("^\\s*application/json\\s*(;|$)"; "i");

# record: a kcat -J object as the log's record (record.go decodeRecord), or
# null for one that is not the log's (no forklab-op, -gen or -rec) or whose
# numbers do not parse: the service skips those too.
def record:
  . as $m
  | (($m.headers // []) as $l | reduce range(0; $l | length; 2) as $i ({}; .[$l[$i]] = ($l[$i + 1] // "")))
  | . as $h
  | {k: $m.offset, v: ($m.payload // ""),
     op: $h["forklab-op"],
     stream: (if ($h["forklab-stream"] // "") != "" then $h["forklab-stream"] else $m.key // "" end),
     gen: ($h["forklab-gen"] | int), rec: ($h["forklab-rec"] | int),
     ct: ($h["content-type"] // ""),
     closed: ($h["stream-closed"] == "true"),
     producer: (if $h["producer-id"] and $h["producer-epoch"] and $h["producer-seq"]
                then {id: $h["producer-id"], epoch: ($h["producer-epoch"] | int), seq: ($h["producer-seq"] | int)}
                else null end),
     seq: ($h["stream-seq"] // ""),
     from: ($h["stream-forked-from"] // ""),
     forkgen: (if $h["forklab-fork-gen"] then $h["forklab-fork-gen"] | int else 0 end),
     # The fork point (position.go forkPoint): the Kafka offset of
     # stream-fork-offset; all of the source (below its tail) when it
     # does not parse.
     forkat: (($h["stream-fork-offset"] // "" | offset | .pos) // infinite),
     cut: (if $h["forklab-fork-cut"] then first($h["forklab-fork-cut"] | capture("^(?<k>[+-]?[0-9]+):(?<n>[+-]?[0-9]+)")
             | {k: (.k | tonumber), n: (.n | tonumber)}) // null else null end)}
  | if .op == null or .gen == null or .rec == null or .forkgen == null
       or (.producer != null and (.producer.epoch == null or .producer.seq == null))
       or ($h["forklab-fork-cut"] and .cut == null)
    then null else . end;

# A new generation, numbering its records from $next.
def generation($r; $next):
  {name: $r.stream, gen: $r.gen, json: ($r.ct | isjson), next: $next, producers: {}, seq: "",
   closed: false, soft: false, refs: 0, source: null, own: 0, entries: []};

# Rule 3 (state.go wstate.refusal; the producer rules are stream/fence
# Decide's StaleEpoch and Duplicate verdicts): whether the generation in .
# refuses append or close $r.
def refuses($r):
  .closed                                                          # RefusedClosed
  or ($r.producer != null and (.producers[$r.producer.id] as $p
      | $p != null and ($r.producer.epoch < $p.epoch                 # RefusedStaleEpoch
                        or ($r.producer.epoch == $p.epoch and $r.producer.seq <= $p.seq))))  # RefusedDuplicate
  or ($r.seq != "" and .seq != "" and $r.seq <= .seq);             # RefusedStreamSeq (byte-wise)

# fold($r): decide record $r for the generation in . (state.go wstate.fold)
# and fold its number, and its append or close when taken, into it:
# {verdict: "copy" | "copy of latest" | "refused" | "taken" | "unknown",
#  g: the generation after}. "unknown" is an operation this recipe does
# not know: nothing changes.
def fold($r):
  if $r.rec < .next then                                           # rule 2
    {verdict: (if $r.rec == .next - 1 then "copy of latest" else "copy" end), g: .}
  elif $r.op == "append" or $r.op == "close" then
    .next = $r.rec + 1                 # taken or refused, the record uses up its number
    | if refuses($r) then {verdict: "refused", g: .}
      else                             # taken (state.go wstate.apply; fence.Replay)
        (if $r.producer != null then .producers[$r.producer.id] = {epoch: $r.producer.epoch, seq: $r.producer.seq} else . end)
        | (if $r.seq != "" then .seq = $r.seq else . end)
        | (if $r.closed then .closed = true else . end)
        | {verdict: "taken", g: .}
      end
  elif $r.op == "delete" then {verdict: "taken", g: (.next = $r.rec + 1)}
  else {verdict: "unknown", g: .} end;

# movecopy($rec; $k): the generation's own record number $rec moves to the
# copy at Kafka offset $k (rule 2; state.go moveDuplicate). Records a fork
# inherited stay where they were.
def movecopy($rec; $k):
  .own as $own
  | .entries |= [range(length) as $i | .[$i] | if $i >= $own and .rec == $rec and $k > .k then .k = $k else . end];

# remove($id): a generation goes for good, and with it a soft-deleted
# source whose last fork it was (rule 5; delete.go applyDelete).
def remove($id):
  .g[$id] as $s
  | (if .streams[$s.name] == $id then del(.streams[$s.name]) else . end)
  | .removed[$s.name] = ([$s.gen, .removed[$s.name] // 0] | max)
  | del(.g[$id])
  | if $s.source != null and .g[$s.source] != null then
      .g[$s.source].refs -= 1
      | if .g[$s.source].soft and .g[$s.source].refs == 0 then remove($s.source) else . end
    else . end;

# create($r): a create record (create.go applyCreate, installCreate).
def create($r):
  .streams[$r.stream] as $old
  | (if $old != null then .g[$old] else null end) as $e
  | "\($r.gen) \($r.stream)" as $id
  | if $e != null and $e.gen == $r.gen then                       # rule 2: a copy of the create
      if ($e | fold($r)).verdict == "copy of latest" then .g[$old] |= movecopy(0; $r.k) else . end
    elif ($e != null and $e.gen > $r.gen) or $r.gen <= (.removed[$r.stream] // 0) then .  # rule 1
    else
      # Rule 4. The source is the current generation of its name, if it
      # is the one the fork was made from (soft-deleted ones included);
      # else the fork inherits nothing.
      (if $r.from != "" then .streams[$r.from] else null end) as $src
      | (if $src != null and .g[$src].gen == $r.forkgen then $src else null end) as $src
      | (if $src == null then [] else
          .g[$src].entries as $es
          | [$es[] | select(.k < $r.forkat)] as $below
          | $below + (if $r.cut != null and $r.cut.n >= 0 and ($es[$below | length] | . != null and .k == $r.cut.k)
                      then [$es[$below | length] | .cut = $r.cut.n] else [] end)
        end) as $inherited
      | .g[$id] = (generation($r; 1)
          | .closed = $r.closed | .source = $src | .own = ($inherited | length)
          | .entries = $inherited + (if $r.v != "" then [{k: $r.k, v: $r.v, rec: 0, cut: null}] else [] end))
      | (if $src != null then .g[$src].refs += 1 else . end)
      # The generation it replaces is dropped unless forks inherit from it.
      | (if $old != null and .g[$old].refs == 0 then del(.g[$old]) else . end)
      | .streams[$r.stream] = $id
      | .gens[$r.stream] = ([$r.gen, .gens[$r.stream] // 0] | max)
    end;

# apply($r): fold one record into the state (rebuild.go Log.apply).
def apply($r):
  if $r == null then .
  elif $r.op == "create" then create($r)
  else
    # Rule 7 (rebuild.go supersede, noteRemoved): a record of a newer
    # generation ends the current one; a delete of one never seen counts.
    (.streams[$r.stream] as $cur
     | if $cur != null and $r.gen > .g[$cur].gen then
         (if .g[$cur].soft then . elif .g[$cur].refs > 0 then .g[$cur].soft = true else remove($cur) end)
         | (if .streams[$r.stream] == $cur then del(.streams[$r.stream]) else . end)
       else . end)
    | (if .streams[$r.stream] == null and $r.op == "delete" then
         .removed[$r.stream] = ([$r.gen, .removed[$r.stream] // 0] | max)
       else . end)
    # Rule 6 (rebuild.go adoptable, adoptTrimmed): a record of a stream
    # not in the state, of a generation at least as new as any seen and
    # not deleted, is one whose create retention removed.
    | (if .streams[$r.stream] == null and $r.op != "delete"
        and $r.gen >= (.gens[$r.stream] // 0) and $r.gen > (.removed[$r.stream] // 0) then
       "\($r.gen) \($r.stream)" as $id
       | .g[$id] = generation($r; $r.rec) | .streams[$r.stream] = $id
       | .gens[$r.stream] = ([$r.gen, .gens[$r.stream] // 0] | max)
     else . end)
    | .streams[$r.stream] as $id
    | if $id == null or .g[$id].gen != $r.gen then .              # rule 1
      else
        (.g[$id] | fold($r)) as $f
        | .g[$id] = $f.g
        | if $f.verdict == "copy of latest" then .g[$id] |= movecopy($r.rec; $r.k)
          elif $f.verdict == "taken" and $r.op == "delete" then
            if .g[$id].refs > 0 then .g[$id].soft = true else remove($id) end  # rule 5
          elif $f.verdict == "taken" and $r.v != "" then
            .g[$id].entries += [{k: $r.k, v: $r.v, rec: $r.rec, cut: null}]
          else . end
      end
  end;

# The prefix of a string whose UTF-8 encoding is its first $n bytes; an
# error when byte $n falls inside a character, which jq, holding text, cannot
# print half of (the API returns those bytes exactly).
def utf8prefix($n):
  reduce explode[] as $c ({out: [], n: 0, full: false};
    ($c | if . < 128 then 1 elif . < 2048 then 2 elif . < 65536 then 3 else 4 end) as $w
    | if .full or .n + $w > $n then .full = true else .out += [$c] | .n += $w end)
  | if .full and .n < $n then
      error("a fork sub-offset cuts a multi-byte UTF-8 character at byte \($n), which jq cannot print: replay this stream with replay.mjs")
    else .out | implode end;

# The value itself, or an error when it holds U+FFFD: kcat -J passes bytes
# that are not UTF-8 through and jq turns each into U+FFFD, so the bytes
# printed would not be the stream's (a binary stream, or text that is not
# UTF-8). A real U+FFFD in the text looks the same to jq: refused as well,
# never printed wrong.
def exact($k):
  if test("\ufffd") then
    error("the record at Kafka offset \($k) holds bytes that are not UTF-8 (or U+FFFD), which kcat -J and jq cannot carry exactly: replay this stream with replay.mjs")
  else . end;

# The text a JSON record contributes to a read, as stream/kafkalog's
# jsonInner: the elements of a top-level array without its brackets (the
# protocol flattens one level), or the value itself.
def trimws: sub("^[ \t\n\r]+"; "") | sub("[ \t\n\r]+$"; "");
def inner: trimws | if startswith("[") then .[1:-1] | trimws else . end;

($ARGS.named.stream // error("give the stream: --arg stream NAME")) as $stream
| ($ARGS.named.from // "") as $from
| reduce inputs as $m ({streams: {}, g: {}, gens: {}, removed: {}, partition: null};
    .partition = $m.partition | apply($m | record))
| . as $state
| (if $from == "" or $from == "-1" then -1
   else ($from | offset) as $o
   | if $o == null then
       error("--arg from \($from): not an offset the API returned (PPPPPPPPPPPPPPPP_OOOOOOOOOOOOOOOO_G_CCCCCCCC) or -1")
     elif $state.partition != null and $o.partition != $state.partition then
       error("--arg from \($from) is an offset of partition \($o.partition); these records are partition \($state.partition): kcat -p \($o.partition)")
     else $o.pos end
   end) as $at
| (if .streams[$stream] != null then .g[.streams[$stream]] else null end) as $s
| if $s == null or $s.soft then
    error("stream \($stream) is not in these records: deleted, or in another partition (HEAD shows Forklab-Kafka-Partition)")
  else
    [$s.entries[] | select(.k >= $at)
     | .cut as $c | .k as $k | .v | exact($k) | (if $s.json then inner else . end) | (if $c != null then utf8prefix($c) else . end)]
    | if $s.json then "[" + (map(select(. != "")) | join(",")) + "]" else join("") end
  end
