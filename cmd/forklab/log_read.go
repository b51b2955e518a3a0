package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forklab/forklab/internal/atomicfile"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/forklab/forklab/stream/client"
	"github.com/spf13/cobra"
)

func init() {
	var (
		stream, offset, offsetFile string
		follow, offsets            bool
		lf                         *logFlags
	)
	cmd := &cobra.Command{
		Use:   "read --stream NAME [--offset O] [--follow] [--offsets]",
		Short: "Print a stream's messages from an offset as JSON lines, then the offset to resume from",
		Long: `read prints the stream's messages from --offset (default -1, the beginning):
one JSON line per message for JSON streams (session events are), the raw
bytes otherwise. With --follow it long-polls for new messages until the
stream is closed or it is interrupted. On exit it prints "next_offset=O" on
stderr (and into --offset-file), so a script resumes with --offset O and gets
exactly the missing tail; also when the log stops answering after some
output (exit 1), not when it refuses the offset.

With --offsets each line starts with the offset right after that message,
then two spaces, then the message, as forklab agent run -v prints them:
fork there (forklab fork --stream NAME --offset O) to keep the message and
everything before it, or read from there to get what follows. It reads one
append per request (the log's max_bytes extension), so messages appended
together in one request share their offset. JSON streams only.`,
		Example: `  forklab log read --stream demo
  forklab log read --stream demo --offsets                  # OFFSET  EVENT, one per line
  forklab log read --stream demo --offset "$(cat next)" --offset-file next --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if stream == "" {
				return usageErr("--stream is required")
			}
			if offsetFile != "" {
				// Refused before anything is read: a symlink or a device
				// is not replaced by the offset.
				if err := atomicfile.CheckReplaceable(offsetFile); err != nil {
					return asInput(fmt.Errorf("--offset-file: %w", err))
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			mode := client.CatchUp
			if follow {
				mode = client.LongPoll
			}
			c := lf.client()
			var err error
			if offset == "now" {
				// "now" is the tail when the request arrives, not a place:
				// resolve it first, so that a follower stopped before the
				// next append saves (and resumes from) that tail, not
				// "now", which would skip what is appended meanwhile.
				var info client.Info
				if info, err = c.Head(ctx, stream); err == nil {
					offset = info.Tail
				}
			}
			r := c.NewReader(stream, offset, mode)
			if offsets {
				r.MaxBytes = 1
			}
			out := bufio.NewWriter(os.Stdout)
			defer out.Flush()
			// printed is the offset after the last chunk printed: one
			// the log returned, "" before the first.
			printed := ""
			for err == nil {
				var ch client.Chunk
				ch, err = r.Next(ctx)
				if err != nil {
					break
				}
				if offsets && !isJSON(ch.ContentType) {
					err = inputError{fmt.Errorf("--offsets prints JSON messages one per line; stream %s is %s: read it without --offsets", stream, ch.ContentType)}
					break
				}
				prefix := ""
				if offsets {
					prefix = ch.Next + "  "
				}
				if err = writeChunk(out, ch, prefix); err != nil {
					break
				}
				if err = out.Flush(); err != nil {
					break
				}
				printed = ch.Next
			}
			next := r.Offset()
			// After a refusal the offset is not one the log confirmed:
			// leave a saved offset as it was. After a failure to reach
			// the log (a restart, a network fault, a 5xx, a 429) the offset
			// after the last chunk printed is still confirmed: say it,
			// or a script could not resume where the output stopped.
			var in inputError
			code := client.StatusCode(err)
			unanswered := code == 0 || code >= 500 || code == http.StatusTooManyRequests
			lost := err != nil && printed != "" && unanswered && !errors.Is(err, io.EOF) && !errors.As(err, &in) && ctx.Err() == nil
			if lost {
				next = printed
			}
			if err == nil || errors.Is(err, io.EOF) || ctx.Err() != nil || lost {
				fmt.Fprintf(os.Stderr, "next_offset=%s\n", next)
				if offsetFile != "" {
					if werr := atomicfile.WriteFile(offsetFile, []byte(next+"\n")); werr != nil {
						return fmt.Errorf("write --offset-file: %w", werr)
					}
				}
			}
			switch {
			case err == nil, errors.Is(err, io.EOF), ctx.Err() != nil:
				return nil
			case errors.As(err, &in):
				return err
			case client.IsGone(err):
				return asInput(goneError(stream, offset, err))
			case client.StatusCode(err) == http.StatusNotFound:
				return asInput(fmt.Errorf("stream %s does not exist (404)", stream))
			case client.StatusCode(err) == http.StatusBadRequest:
				return asInput(fmt.Errorf("read %s: %w", stream, err))
			case lost:
				return fmt.Errorf("read %s: %w; resume with --offset %s", stream, err, next)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&stream, "stream", "", "stream to read")
	f.StringVar(&offset, "offset", client.Start, "offset to read from (-1: the beginning; now: the tail)")
	f.BoolVarP(&follow, "follow", "f", false, "wait for new messages (long-poll) until the stream is closed")
	f.StringVar(&offsetFile, "offset-file", "", "also write the next offset to this file on exit")
	f.BoolVar(&offsets, "offsets", false, "start each line with the offset right after that message (to fork or resume there)")
	lf = addLogFlags(cmd)
	ownSignals(cmd)
	logCmd.AddCommand(cmd)
}

// isJSON reports a JSON stream's content type.
func isJSON(contentType string) bool {
	return bytes.HasPrefix(bytes.TrimSpace([]byte(contentType)), []byte("application/json"))
}

// writeChunk prints a chunk: one line per JSON message, each after prefix,
// raw bytes otherwise.
func writeChunk(w *bufio.Writer, ch client.Chunk, prefix string) error {
	if !isJSON(ch.ContentType) {
		_, err := w.Write(ch.Data)
		return err
	}
	msgs, err := ch.Messages()
	if err != nil {
		return err
	}
	for _, m := range msgs {
		var buf bytes.Buffer
		buf.WriteString(prefix)
		if err := compactJSON(&buf, m); err != nil {
			return err
		}
		buf.WriteByte('\n')
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

func compactJSON(dst *bytes.Buffer, src []byte) error { return json.Compact(dst, src) }

// goneError words a 410 by its reason (the log's Forklab-Gone-Reason):
// the stream was deleted, or the offset is of a generation of the stream
// that was deleted and created again since (read the new one from -1), or
// older than the log retains (read from the earliest offset it names).
func goneError(stream, offset string, err error) error {
	switch client.GoneReason(err) {
	case client.GoneGeneration:
		return fmt.Errorf("offset %s is from an earlier generation of %s: the stream was deleted and created again since (410 Gone); read the new generation from -1 (forklab log read --stream %s --offsets lists its offsets)", offset, stream, stream)
	case client.GoneRetention:
		from := "-1 for everything still retained"
		if e := client.EarliestOffset(err); e != "" {
			from = e + ", the earliest offset still retained"
		}
		return fmt.Errorf("offset %s of %s is older than the log retains (410 Gone); read from %s", offset, stream, from)
	case client.GoneDeleted:
		return fmt.Errorf("stream %s was deleted (410 Gone; its data is kept only for its forks)", stream)
	}
	return fmt.Errorf("%s at %s: %w", stream, offset, err)
}

// goneHint is what to do about a 410 met along the way of a longer
// operation (fork, agent run), to follow its error.
func goneHint(err error) string {
	switch client.GoneReason(err) {
	case client.GoneGeneration:
		return "the stream was deleted and created again since that offset: use one of the new generation, which forklab log read --offsets lists"
	case client.GoneRetention:
		if e := client.EarliestOffset(err); e != "" {
			return "the log no longer retains that offset; the earliest it retains is " + e
		}
		return "the log no longer retains that offset"
	case client.GoneDeleted:
		return "nothing can read or continue a deleted stream; its forks keep its events and can be read"
	}
	return ""
}
