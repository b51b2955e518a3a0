// Runs conformance.test.mjs: the suite's CLI finds no test files when it is
// installed as a package, so the suite is called programmatically.
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["conformance.test.mjs"],
    testTimeout: 30000,
    hookTimeout: 30000,
    reporters: ["default"],
  },
})
