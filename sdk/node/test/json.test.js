// Exact integers on the wire: seeds beyond 2^53 read as BigInts and written
// back as the same JSON numbers; everything else as JSON.parse and
// JSON.stringify have it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { parseLine, stringifyLine } from "../src/json.js";

test("integers beyond 2^53 round-trip exactly", () => {
  const line = '{"seed":9223372036854775807,"n":-9007199254740993,"safe":9007199254740991,"s":"9223372036854775807","x":1.5,"e":1e21,"list":[9007199254740993,2],"m":"\\u0000bigint:42","k\\"\\u0000bigint:5":"x"}';
  const v = parseLine(line);
  assert.equal(v.seed, 9223372036854775807n);
  assert.equal(v.n, -9007199254740993n);
  assert.equal(v.safe, 9007199254740991);
  assert.equal(v.s, "9223372036854775807");
  assert.equal(v.list[0], 9007199254740993n);
  assert.equal(v.m, "\u0000bigint:42");
  assert.equal(stringifyLine(v), '{"seed":9223372036854775807,"n":-9007199254740993,"safe":9007199254740991,"s":"9223372036854775807","x":1.5,"e":1e+21,"list":[9007199254740993,2],"m":"\\u0000bigint:42","k\\"\\u0000bigint:5":"x"}');
});

test("a line without a long run of digits reads as JSON.parse reads it", () => {
  for (const line of ['{"a":"\\u0000x","b":[1,2.5,null,true],"c":{"d":"123456789012345"}}', '[{"id":1},{"id":2}]', '"\\u0000bigint:7"']) {
    assert.deepEqual(parseLine(line), JSON.parse(line));
    assert.equal(stringifyLine(parseLine(line)), JSON.stringify(JSON.parse(line)));
  }
});

test("a string beginning with U+0000 is never taken for an integer", () => {
  const v = { s: "\u0000bigint:42", t: "\u0000\u0000x", big: 2n ** 60n };
  const line = stringifyLine(v);
  assert.equal(line, '{"s":"\\u0000bigint:42","t":"\\u0000\\u0000x","big":1152921504606846976}');
  assert.deepEqual(parseLine(line), v);
});
