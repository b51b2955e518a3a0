# replay.jq: one stream of the forklab session log, replayed from its Kafka
# records as the HTTP API reads it. Input: kcat -J, one JSON object per
# record of the stream's partition, from the beginning, in offset order.
#
#   kcat -C -b BROKER -t forklab.streams -p PARTITION -o beginning -e -q -J |
#     jq -n -j --arg stream NAME [--arg from OFFSET] -f stream/replay/replay.jq
#
# PARTITION is HEAD's Forklab-Kafka-Partition. Output: exactly what the
# API reads (GET ?offset=OFFSET, all chunks joined), from OFFSET (an offset
# the API returned) or from the beginning: the stream's bytes, or for a JSON
# stream one JSON array of its messages, each as its appender wrote it. It folds the records the way the
# service rebuilds its state (stream/kafkalog): a stream is its current
# generation (forklab-gen) only, records of a deleted generation are never
# printed; a second copy of a record (forklab-rec seen before) replaces the
# first; a fork starts with its source's records before the fork offset
# (and the part of the record a sub-offset cuts). Values are printed whole,
# newlines and tabs included. Limits: jq holds the partition's live streams
# in memory, and decodes values as UTF-8 text (use replay.mjs for binary
# streams, or a sub-offset that cuts a multi-byte character).

def headers: (.headers // []) as $h | reduce range(0; $h | length; 2) as $i ({}; .[$h[$i]] = $h[$i + 1]);

# The Kafka offset in an offset token: its second field.
def kafkaoffset: split("_")[1] | tonumber;

# The longest prefix of a string whose UTF-8 encoding has at most $n bytes.
def utf8prefix($n):
  reduce explode[] as $c ({out: [], n: 0, full: false};
    ($c | if . < 128 then 1 elif . < 2048 then 2 elif . < 65536 then 3 else 4 end) as $w
    | if .full or .n + $w > $n then .full = true else .out += [$c] | .n += $w end)
  | .out | implode;

def isjson: test("^\\s*application/json\\s*(;|$)"; "i");

# The text a JSON record contributes to a read, as stream/kafkalog's
# jsonInner: the elements of a top-level array without its brackets (the
# protocol flattens one level), or the value itself.
def trimws: sub("^[ \t\n\r]+"; "") | sub("[ \t\n\r]+$"; "");
def inner: trimws | if startswith("[") then .[1:-1] | trimws else . end;

# apply($r): fold record $r (a kcat -J object) into the state
#   {s: {name: {gen, json, next, entries: [{k, v, rec, own, cut}]}},
#    rm: {name: highest deleted generation}, seen: {name: highest generation}}
def apply($r):
  ($r | headers) as $h
  | if ($h["forklab-op"] // null) == null or ($h["forklab-gen"] // null) == null then . else
    ($h["forklab-stream"] // $r.key) as $n
    | ($h["forklab-gen"] | tonumber) as $g
    | ($h["forklab-rec"] | tonumber) as $rec
    | $h["forklab-op"] as $op
    | ($r.payload // "") as $v
    | if $op == "create" then
        if .s[$n] != null and .s[$n].gen == $g then
          .s[$n].entries |= map(if .own and .rec == 0 then .k = $r.offset else . end)
        elif (.s[$n] != null and .s[$n].gen > $g) or $g <= (.rm[$n] // 0) then .
        else
          (if $h["stream-forked-from"] != null then
             .s[$h["stream-forked-from"]] as $src
             | if $src != null and $src.gen == ($h["forklab-fork-gen"] | tonumber) then
                 ($h["stream-fork-offset"] | kafkaoffset) as $fp
                 | [$src.entries[] | select(.k < $fp) | .own = false]
                   + (if $h["forklab-fork-cut"] != null then
                        ($h["forklab-fork-cut"] | split(":")[0] | tonumber) as $ck
                        | ($h["forklab-fork-cut"] | split(":")[1] | tonumber) as $cn
                        | [$src.entries[] | select(.k == $ck) | .own = false | .cut = $cn]
                      else [] end)
               else [] end
           else [] end) as $inherited
          | .s[$n] = {gen: $g, json: ($h["content-type"] | isjson), next: 1,
                      entries: ($inherited + (if $v != "" then [{k: $r.offset, v: $v, rec: 0, own: true, cut: null}] else [] end))}
          | .seen[$n] = ([$g, .seen[$n] // 0] | max)
        end
      else
        # A stream whose create record retention dropped goes on from here.
        (if .s[$n] == null and $op != "delete" and $g > (.rm[$n] // 0) and $g >= (.seen[$n] // 0) then
           .s[$n] = {gen: $g, json: ($h["content-type"] | isjson), next: $rec, entries: []} | .seen[$n] = $g
         else . end)
        | if .s[$n] == null or .s[$n].gen != $g then .
          elif $rec < .s[$n].next then
            .s[$n].entries |= map(if .own and .rec == $rec then .k = $r.offset else . end)
          elif $op == "delete" then
            .rm[$n] = $g | del(.s[$n])
          else
            (if $v != "" then .s[$n].entries += [{k: $r.offset, v: $v, rec: $rec, own: true, cut: null}] else . end)
            | .s[$n].next = $rec + 1
          end
      end
  end;

($ARGS.named.stream // error("give the stream: --arg stream NAME")) as $stream
| (($ARGS.named.from // "") | if . == "" or . == "-1" then -1 else kafkaoffset end) as $from
| reduce inputs as $r ({s: {}, rm: {}, seen: {}}; apply($r))
| .s[$stream] as $s
| if $s == null then
    error("stream \($stream) is not in these records: deleted, or in another partition (HEAD shows Forklab-Kafka-Partition)")
  else
    [$s.entries[] | select(.k >= $from)
     | .cut as $c | .v | (if $s.json then inner else . end) | (if $c != null then utf8prefix($c) else . end)]
    | if $s.json then "[" + (map(select(. != "")) | join(",")) + "]" else join("") end
  end
