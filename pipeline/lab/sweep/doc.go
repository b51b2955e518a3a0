// Package sweep runs the fork lab over a range of seeds and writes the
// results directory: Parquet tables (schemas) and, last, manifest.json.
//
// Work is cut into shards: a fixed number of consecutive seeds of one
// configuration. A shard is the unit of parallelism and of output — each
// shard writes one compressed Parquet file per table, in row groups
// of bounded size — so memory does not grow with the number of seeds, and
// the files and their rows are the same whatever the number of workers.
//
// A results directory without manifest.json is an unfinished sweep. Every
// file is written under a temporary name and renamed when complete; the
// manifest is renamed into place after every table file.
package sweep
