// The SDK's TypeScript types compile, strictly, against test/types.ts.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const tsc = fileURLToPath(new URL("../node_modules/typescript/bin/tsc", import.meta.url));

test("the types check (tsc --noEmit --strict)", () => {
  assert.ok(existsSync(tsc), "typescript is not installed: run npm ci in sdk/node");
  const r = spawnSync(process.execPath, [tsc, "-p", fileURLToPath(new URL("tsconfig.json", import.meta.url))], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});
