// Package export gets a results directory's data out to other tools.
//
// Two ways out:
//
//   - WriteDB writes DIR/results.duckdb, a DuckDB database of views (no
//     copied data) over the directory's Parquet tables, the report queries
//     as views, and the statistics macros, reading DIR by its absolute
//     path (or DuckDB's file_search_path, once it moved). BI tools and the
//     duckdb CLI open it from any working directory.
//   - Query runs ad hoc SQL over a results directory and writes the result
//     as an aligned table, CSV, JSON, JSON Lines, Parquet, or Arrow IPC
//     (file or stream). CSV, JSON and Parquet go through DuckDB's COPY,
//     which streams the query into the file in bounded memory; Arrow goes
//     through DuckDB's Arrow interface (duckdb-go, build tag duckdb_arrow)
//     and apache/arrow-go's ipc writer, one record batch at a time. Since
//     duckdb-go holds a whole result in memory before its first row, the
//     table and Arrow formats first stream the rows into a temporary
//     on-disk DuckDB table and read it back a row group at a time. A file
//     is written under a temporary name and renamed into place when it is
//     complete, so a failed query never leaves a half-written file behind
//     under the name asked for.
package export
