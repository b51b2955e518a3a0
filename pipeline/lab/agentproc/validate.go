package agentproc

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/forklab/forklab/schemas"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaBase is the $id prefix of the protocol's schemas.
const schemaBase = "https://forklab.dev/schemas/agent-protocol/"

var (
	schemaOnce sync.Once
	schemaSet  map[string]*jsonschema.Schema
	schemaErr  error
)

// Schema returns the compiled JSON Schema of one message body, by file
// name without .schema.json: "start.result", "branch.params",
// "declaration", "request", "response". The schemas are schemas.AgentProtocol.
func Schema(name string) (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		c := jsonschema.NewCompiler()
		files, err := fs.Glob(schemas.AgentProtocol, "agent-protocol/*.schema.json")
		if err != nil {
			schemaErr = err
			return
		}
		for _, f := range files {
			b, err := fs.ReadFile(schemas.AgentProtocol, f)
			if err != nil {
				schemaErr = err
				return
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				schemaErr = fmt.Errorf("%s: %w", f, err)
				return
			}
			if err := c.AddResource(schemaBase+path.Base(f), doc); err != nil {
				schemaErr = fmt.Errorf("%s: %w", f, err)
				return
			}
		}
		schemaSet = map[string]*jsonschema.Schema{}
		for _, f := range files {
			name := strings.TrimSuffix(path.Base(f), ".schema.json")
			s, err := c.Compile(schemaBase + path.Base(f))
			if err != nil {
				schemaErr = fmt.Errorf("compile %s: %w", f, err)
				return
			}
			schemaSet[name] = s
		}
	})
	if schemaErr != nil {
		return nil, schemaErr
	}
	s, ok := schemaSet[name]
	if !ok {
		return nil, fmt.Errorf("no schema %q in schemas/agent-protocol", name)
	}
	return s, nil
}

// ValidateJSON checks raw JSON against the named message schema. The error
// names the first offending place in the message as a path from prefix
// (result.forks[0].cost: …).
func ValidateJSON(name, prefix string, raw []byte) error {
	s, err := Schema(name)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("%s is not JSON: %v", prefix, err)
	}
	return validateValue(s, prefix, v)
}

func validateValue(s *jsonschema.Schema, prefix string, v any) error {
	err := s.Validate(v)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return fmt.Errorf("%s: %v", prefix, err)
	}
	return fmt.Errorf("%s", describeValidation(ve, prefix))
}

var printer = message.NewPrinter(language.English)

// describeValidation words a schema violation as "where: what", taking the
// deepest cause: the place closest to the mistake.
func describeValidation(ve *jsonschema.ValidationError, prefix string) string {
	leaf := deepest(ve)
	msg := leaf.ErrorKind.LocalizedString(printer)
	if _, ok := leaf.ErrorKind.(*kind.Not); ok {
		msg = "must not be null (a checkpoint is any other JSON value)"
	}
	return where(prefix, leaf.InstanceLocation) + ": " + msg
}

func deepest(ve *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := ve
	for _, c := range ve.Causes {
		if d := deepest(c); len(d.InstanceLocation) > len(best.InstanceLocation) ||
			(len(d.InstanceLocation) == len(best.InstanceLocation) && len(best.Causes) > 0 && len(d.Causes) == 0) {
			best = d
		}
	}
	return best
}

// where renders an instance location as prefix.a.b[0].c.
func where(prefix string, loc []string) string {
	var b strings.Builder
	b.WriteString(prefix)
	if prefix == "the line" && len(loc) > 0 {
		b.Reset()
	}
	for _, p := range loc {
		if _, err := strconv.Atoi(p); err == nil {
			b.WriteString("[" + p + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	if b.Len() == 0 {
		return "the message"
	}
	return b.String()
}
