// Exact integers on the wire (docs/agent-protocol.md, "Exact integers in
// JavaScript"). JSON.parse reads every number as a double, exact up to 2^53
// only, while a task seed goes up to 2^63-2. exactParse reads an integer
// literal beyond 2^53 as a BigInt (numbers inside strings are left alone);
// exactStringify writes a BigInt back as a JSON number. The integers travel
// through JSON.parse as strings beginning with U+0000 ("\u0000bigint:…"): a
// string value that itself begins with U+0000 gets one more on the way in
// and loses it on the way out, so that no string is taken for an integer.
// The recipe's lines are the protocol document's, word for word
// (TestExactIntegerRecipe checks them).

const BIG = "\u0000bigint:";
const exactParse = (line) => JSON.parse(
  line.replace(/"(?:[^"\\]|\\.)*"(?=(\s*:)?)|(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g, (t, key) =>
    t[0] !== '"' ? (Number.isSafeInteger(Number(t)) ? t : `"\\u0000bigint:${t}"`)
      : key === undefined && t.startsWith('"\\u0000') ? '"\\u0000' + t.slice(1) : t),
  (k, v) => (typeof v !== "string" || v[0] !== "\u0000" ? v : v.startsWith(BIG) ? BigInt(v.slice(BIG.length)) : v.slice(1)));
const exactStringify = (v) => JSON.stringify(v, (k, x) =>
    typeof x === "bigint" ? BIG + x : typeof x === "string" && x[0] === "\u0000" ? "\u0000" + x : x)
  .replace(/"(?:[^"\\]|\\.)*"(?=(\s*:)?)/g, (t, key) => key !== undefined ? t
    : /^"\\u0000bigint:-?\d+"$/.test(t) ? t.slice(14, -1) : t.startsWith('"\\u0000\\u0000') ? '"' + t.slice(7) : t);

const longDigits = /\d{16}/;

/**
 * Parses one line of JSON, integers beyond 2^53 as BigInts. A line without
 * a run of 16 digits holds no such integer and takes JSON.parse alone,
 * which gives the same value.
 * @param {string} line
 * @returns {unknown}
 */
export function parseLine(line) {
  return longDigits.test(line) ? exactParse(line) : JSON.parse(line);
}

/**
 * Writes a value as one line of JSON (no newline), BigInts as JSON numbers.
 * A value without BigInts takes JSON.stringify alone, which writes the same.
 * @param {unknown} value
 * @returns {string}
 */
export function stringifyLine(value) {
  try {
    return JSON.stringify(value);
  } catch (e) {
    if (e instanceof TypeError && /BigInt/.test(e.message)) return exactStringify(value);
    throw e;
  }
}

export { exactParse, exactStringify };
