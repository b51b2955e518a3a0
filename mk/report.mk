# Results people can look at and plug in (issue 7): the HTML report,
# results.duckdb for BI tools, and the browser check of the report.
# The top Makefile includes this file.

# (The build tag duckdb_arrow for forklab sql --format arrow is set in the
# top Makefile.)

CHROMIUM ?= chromium

.PHONY: report-html results-db chromium test-browser docs-screenshot bench-export

# The self-contained HTML report of $(OUT) (make sweep writes $(OUT) first).
report-html: build
	$(BIN) report $(OUT) --html $(OUT)/report.html --overwrite > /dev/null
	@echo "open $(OUT)/report.html in a browser (it needs no network)"

# $(OUT)/results.duckdb: views over the Parquet tables for BI tools.
results-db: build
	$(BIN) db $(OUT)

# Debian's chromium, for the browser test of the HTML report (slow the first
# time: it installs a browser).
chromium:
	@command -v $(CHROMIUM) > /dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium; }

# The report rendered by headless Chromium at 1280×800: fails, rather than
# skips, when Chromium is missing.
test-browser: chromium
	FORKLAB_REQUIRE_CHROMIUM=1 $(GO) test -count=1 -run Browser ./pipeline/analysis/htmlreport

# Regenerate the README's picture of the report (docs/report.png): the
# seed's sweep, its first screen at 1280×800 in headless Chromium.
CHROMIUM_FLAGS = --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
	--disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
	--host-resolver-rules="MAP * ~NOTFOUND" --window-size=1280,800
docs-screenshot: chromium build
	tmp=$$(mktemp -d) && bin=$(CURDIR)/$(BIN) && cd $$tmp && \
	$$bin sweep --seeds 0:300 --fork-at 3 --out out -q && \
	$$bin report out --html report.html > /dev/null && \
	$(CHROMIUM) $(CHROMIUM_FLAGS) --user-data-dir=$$tmp/profile --screenshot=$(CURDIR)/docs/report.png file://$$tmp/report.html && \
	rm -rf $$tmp

# Peak memory of forklab sql per output format for a 10,000,000-row result
# (FORKLAB_BENCH_ROWS changes it), each format in its own process, with its
# ratio to DuckDB's COPY to CSV.
bench-export:
	$(GO) test -run '^$$' -bench QueryPeakMemory -benchtime 1x -timeout 30m ./pipeline/analysis/export
