package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"

	_ "github.com/duckdb/duckdb-go/v2"
)

func main() {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		panic(err)
	}
	db.Exec("SET file_search_path = '" + os.Args[1] + "'")
	rows, err := db.Query(os.Args[2])
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	cols, _ := rows.Columns()
	fmt.Println(strings.Join(cols, "\t"))
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		rows.Scan(ptrs...)
		var s []string
		for _, v := range vals {
			s = append(s, fmt.Sprint(v))
		}
		fmt.Println(strings.Join(s, "\t"))
	}
}
