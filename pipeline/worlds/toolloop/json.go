package toolloop

import "strconv"

// AppendJSON appends s's JSON encoding to b: the bytes json.Marshal writes
// for s, without reflection or allocation (fork.Encoder uses it, through
// fork.JSONAppender or Encoder.StateJSON, to write a checkpoint per fork).
// TestAppendJSONMatchesMarshal holds it to json.Marshal. An Outcome or
// Served value without a name (which Step never makes) is written as its
// number, where json.Marshal fails.
func (s *State) AppendJSON(b []byte) []byte {
	b = append(b, `{"seed":`...)
	b = strconv.AppendUint(b, s.Seed, 10)
	b = appendInt(append(b, `,"k":`...), int64(s.K))
	b = appendInt(append(b, `,"budget":`...), s.Budget)
	b = appendInt(append(b, `,"onset":`...), int64(s.Onset))
	b = appendInt(append(b, `,"stale_len":`...), int64(s.StaleLen))
	b = appendInt(append(b, `,"steps":`...), int64(s.Steps))
	b = appendInt(append(b, `,"tokens":`...), s.Tokens)
	b = appendInt(append(b, `,"context":`...), s.Context)
	b = appendInt(append(b, `,"model_turns":`...), int64(s.ModelTurns))
	b = appendInt(append(b, `,"searches":`...), int64(s.Searches))
	b = appendInt(append(b, `,"facts":`...), int64(s.Facts))
	b = appendInt(append(b, `,"facts_true":`...), int64(s.True))
	b = appendInt(append(b, `,"repeat_run":`...), int64(s.RepeatRun))
	b = appendInt(append(b, `,"since_new":`...), int64(s.SinceNew))
	b = appendInt(append(b, `,"errors":`...), int64(s.Errors))
	b = appendInt(append(b, `,"no_tools":`...), int64(s.NoTools))
	b = appendName(append(b, `,"last":`...), outcomeNames[:], int(s.Last))
	b = appendName(append(b, `,"served":`...), servedNames[:], int(s.Served))
	b = appendBool(append(b, `,"has_result":`...), s.HasResult)
	b = appendBool(append(b, `,"purged":`...), s.Purged)
	b = appendBool(append(b, `,"answered":`...), s.Answered)
	b = appendBool(append(b, `,"correct":`...), s.Correct)
	if s.Score != 0 {
		// As encoding/json writes a float64 of [1e-6, 1e21), where every
		// score above 0 lies (at least 1/64).
		b = strconv.AppendFloat(append(b, `,"score":`...), s.Score, 'f', -1, 64)
	}
	return append(b, '}')
}

// AppendObservation appends the JSON of s's observation to b: the bytes
// json.Marshal writes of World.Observe(s), without reflection (a branch's
// transcript holds one per step; TestAppendJSONMatchesMarshal holds the two
// equal).
func AppendObservation(s *State, b []byte) []byte {
	b = appendInt(append(b, `{"step":`...), int64(s.Steps))
	b = appendName(append(b, `,"outcome":`...), outcomeNames[:], int(s.Last))
	b = appendInt(append(b, `,"facts":`...), int64(s.Facts))
	b = appendInt(append(b, `,"k":`...), int64(s.K))
	b = appendInt(append(b, `,"tokens_used":`...), s.Tokens)
	b = appendInt(append(b, `,"tokens_left":`...), max(0, s.Budget-s.Tokens))
	b = appendBool(append(b, `,"answered":`...), s.Answered)
	return append(b, '}')
}

// appendInt appends v in decimal, with a shortcut for small values.
func appendInt(b []byte, v int64) []byte {
	if uint64(v) < 10 {
		return append(b, byte('0'+v))
	}
	return strconv.AppendInt(b, v, 10)
}

// appendName appends names[i] as a JSON string (the names need no
// escaping), or i when it has no name.
func appendName(b []byte, names []string, i int) []byte {
	if i < len(names) {
		b = append(b, '"')
		b = append(b, names[i]...)
		return append(b, '"')
	}
	return strconv.AppendInt(b, int64(i), 10)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}
