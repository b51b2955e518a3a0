// A handler for std::terminate: DuckDB throws its errors as C++
// exceptions, and one that escapes (thrown from a destructor, or on a
// thread of DuckDB's own) would end the process through libstdc++'s default
// handler — "terminate called after throwing …", SIGABRT, and the Go
// runtime's dump of every goroutine. This one hands the exception's message
// to Go (forklabDuckTerminate, terminate.go), which reports it in one line
// and exits 1; it never returns.
#include <exception>
#include <string>
#include <unistd.h>

extern "C" void forklabDuckTerminate(char *msg);

static void forklab_terminate() {
	std::string msg = "an unknown C++ exception";
	if (std::exception_ptr e = std::current_exception()) {
		try {
			std::rethrow_exception(e);
		} catch (const std::exception &x) {
			msg = x.what();
		} catch (...) {
		}
	} else {
		msg = "std::terminate called without an exception";
	}
	forklabDuckTerminate(const_cast<char *>(msg.c_str()));
	_exit(1);
}

extern "C" void forklab_install_terminate(void) { std::set_terminate(forklab_terminate); }
