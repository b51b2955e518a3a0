// Package layering holds the test of the module's one import rule
// (DESIGN.md, "Layout"): the session log (stream/...) never imports the fork
// lab (pipeline/...). Utilities both halves use live in internal/.
package layering
