package duck

/*
void forklab_install_terminate(void);
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
)

var (
	installTerminate sync.Once
	crashMu          sync.Mutex
	onCrash          = func(msg string) {}
)

// OnCrash sets what runs when DuckDB fails in a way no caller can catch: a
// C++ exception that escapes the library (one thrown in a destructor, such
// as a log file's flush that the sandbox refuses when the database closes:
// CALL enable_logging(storage = 'file', storage_path = '/elsewhere')).
// fn gets DuckDB's message on one line ("Permission Error: Cannot access
// …") and should remove what the process was writing; the process then
// prints "forklab: DuckDB failed: MESSAGE (…)" on standard error and exits
// with status 1 (a failure, not bad input: docs/exit-status.md), instead of
// aborting with a C++ message and a Go stack dump. Every database Open
// opens has the handler.
func OnCrash(fn func(msg string)) {
	crashMu.Lock()
	onCrash = fn
	crashMu.Unlock()
}

//export forklabDuckTerminate
func forklabDuckTerminate(cmsg *C.char) {
	msg := crashMessage(C.GoString(cmsg))
	crashMu.Lock() // held until exit: a second crash waits for the first
	onCrash(msg)
	fmt.Fprintf(os.Stderr, "forklab: DuckDB failed: %s (an error inside the DuckDB library ended the command; nothing it was writing was kept)\n", msg)
	os.Exit(1)
}

// crashMessage is a DuckDB exception's what() on one line: DuckDB gives
// {"exception_type":"Permission","exception_message":"…"}, shown as its
// own messages are ("Permission Error: …"); any other text as it is.
func crashMessage(what string) string {
	var e struct {
		Type    string `json:"exception_type"`
		Message string `json:"exception_message"`
	}
	if json.Unmarshal([]byte(what), &e) == nil && e.Message != "" {
		what = e.Message
		if e.Type != "" {
			what = e.Type + " Error: " + e.Message
		}
	}
	return strings.Join(strings.Fields(what), " ")
}

// handleTerminate installs the handler once per process.
func handleTerminate() { installTerminate.Do(func() { C.forklab_install_terminate() }) }
