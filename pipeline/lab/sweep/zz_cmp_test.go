package sweep

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/forklab/forklab/pipeline/world"
	"github.com/forklab/forklab/schemas"
	"github.com/parquet-go/parquet-go"
)

type v1Pair struct {
	Seed             int64  `parquet:"seed,delta"`
	Arm              string `parquet:"arm,dict"`
	Replicas         int32  `parquet:"replicas,delta"`
	Status           string `parquet:"status,dict"`
	ControlWins      int32  `parquet:"control_wins,delta"`
	TreatmentWins    int32  `parquet:"treatment_wins,delta"`
	ControlSuccess   bool   `parquet:"control_success"`
	TreatmentSuccess bool   `parquet:"treatment_success"`
	Label            string `parquet:"label,dict"`
	Quadrant         string `parquet:"quadrant,dict"`
	Fault            bool   `parquet:"fault"`
	SameObs          bool   `parquet:"same_obs"`
	RepeatRun        int64  `parquet:"repeat_run,delta"`
	ObsValue         int64  `parquet:"obs_value,delta"`
	StepsUsed        int64  `parquet:"steps_used,delta"`
	BudgetLeft       int64  `parquet:"budget_left,delta"`
	HS               bool   `parquet:"hidden_stuck"`
	HF               bool   `parquet:"hidden_fault"`
	HV               int64  `parquet:"hidden_value,delta"`
	Extra            float64 `parquet:"extra_steps"`
}

const cmpRows = 1 << 18

func BenchmarkCmpStruct(b *testing.B) {
	rows := make([]v1Pair, 4096)
	opts := []parquet.WriterOption{parquet.Compression(&zstdFastest), parquet.DataPageStatistics(false), parquet.PageBufferSize(64 << 10),
		parquet.SkipPageBounds("arm"), parquet.SkipPageBounds("status"), parquet.SkipPageBounds("label"), parquet.SkipPageBounds("quadrant"), parquet.MaxRowsPerRowGroup(1 << 17)}
	for range b.N {
		w := parquet.NewGenericWriter[v1Pair](io.Discard, opts...)
		for k := 0; k < cmpRows; k += 4096 {
			for i := range rows {
				s := int64(k + i)
				rows[i] = v1Pair{Seed: s, Arm: "on", Replicas: 1, Status: "ok", ControlWins: int32(s & 1), Label: "harmed", Quadrant: "sleeping_dog",
					RepeatRun: s % 3, ObsValue: s % 7, StepsUsed: 3, BudgetLeft: s % 5, HV: s % 6, Extra: 1}
			}
			w.Write(rows)
		}
		w.Close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/cmpRows, "ns/row")
}

func BenchmarkCmpColumns(b *testing.B) {
	d := world.Declaration{Name: "x", Version: "1", Features: []world.Field{{Name: "same_obs", Kind: world.Bool}, {Name: "repeat_run", Kind: world.Int},
		{Name: "obs_value", Kind: world.Int}, {Name: "steps_used", Kind: world.Int}, {Name: "budget_left", Kind: world.Int}},
		Hidden: []world.Field{{Name: "stuck", Kind: world.Bool}, {Name: "fault", Kind: world.Bool}, {Name: "value", Kind: world.Int}},
		FaultFlag: "fault", Cost: world.CostModel{Fields: []string{"steps"}}}
	l, err := layoutOf("pairs", schemas.Pairs(d), d.Cost.Reports)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	t := newTableFile(l, 0)
	for range b.N {
		if err := t.open(dir, "x.parquet", false); err != nil {
			b.Fatal(err)
		}
		for k := 0; k < cmpRows; k++ {
			s := int64(k)
			t.putInt64(0, s)
			t.putString(1, "on")
			t.putInt32(2, 1)
			t.putString(3, "ok")
			t.putNull(4)
			t.putInt32(5, int32(s&1))
			t.putInt32(6, 0)
			t.putBool(7, false)
			t.putBool(8, false)
			t.putString(9, "harmed")
			t.putString(10, "sleeping_dog")
			t.putBool(11, false)
			t.putBool(12, false)
			t.putInt64(13, s%3)
			t.putInt64(14, s%7)
			t.putInt64(15, 3)
			t.putInt64(16, s%5)
			t.putBool(17, false)
			t.putBool(18, false)
			t.putInt64(19, s%6)
			t.putDouble(20, 1)
			t.putNull(21)
			t.putNull(22)
			t.putNull(23)
			if _, err := t.end(); err != nil {
				b.Fatal(err)
			}
		}
		t.flush(0, t.rows)
		t.w.Close()
		t.f.Close()
		os.Remove(t.tmp)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/cmpRows, "ns/row")
}

var _ = bytes.NewReader

func BenchmarkCmpBuffer(b *testing.B) {
	schema := parquet.SchemaOf(new(v1Pair))
	opts := []parquet.WriterOption{schema, parquet.Compression(&zstdFastest), parquet.DataPageStatistics(false), parquet.PageBufferSize(64 << 10),
		parquet.SkipPageBounds("arm"), parquet.SkipPageBounds("status"), parquet.SkipPageBounds("label"), parquet.SkipPageBounds("quadrant"), parquet.MaxRowsPerRowGroup(1 << 17)}
	const group = 1 << 15
	i64 := make([][]int64, 20)
	i32 := make([][]int32, 20)
	bs := make([][]bool, 20)
	f64 := make([][]float64, 20)
	ss := make([][]parquet.Value, 20)
	kinds := map[int]byte{}
	for i, c := range schema.Fields() {
		switch c.Type().Kind() {
		case parquet.Int64:
			kinds[i] = 'l'
		case parquet.Int32:
			kinds[i] = 'i'
		case parquet.Boolean:
			kinds[i] = 'b'
		case parquet.Double:
			kinds[i] = 'd'
		default:
			kinds[i] = 's'
		}
	}
	for range b.N {
		w := parquet.NewGenericWriter[any](io.Discard, opts...)
		buf := parquet.NewBuffer(schema)
		for k := 0; k < cmpRows; k += group {
			for c := range 20 {
				for i := range group {
					s := int64(k + i)
					switch kinds[c] {
					case 'l':
						i64[c] = append(i64[c], s%7)
					case 'i':
						i32[c] = append(i32[c], int32(s&1))
					case 'b':
						bs[c] = append(bs[c], s&1 == 0)
					case 'd':
						f64[c] = append(f64[c], 1)
					default:
						ss[c] = append(ss[c], parquet.ByteArrayValue([]byte("on")))
					}
				}
			}
			cbs := buf.ColumnBuffers()
			for c := range 20 {
				switch kinds[c] {
				case 'l':
					cbs[c].(parquet.Int64Writer).WriteInt64s(i64[c])
					i64[c] = i64[c][:0]
				case 'i':
					cbs[c].(parquet.Int32Writer).WriteInt32s(i32[c])
					i32[c] = i32[c][:0]
				case 'b':
					cbs[c].(parquet.BooleanWriter).WriteBooleans(bs[c])
					bs[c] = bs[c][:0]
				case 'd':
					cbs[c].(parquet.DoubleWriter).WriteDoubles(f64[c])
					f64[c] = f64[c][:0]
				default:
					cbs[c].WriteValues(ss[c])
					ss[c] = ss[c][:0]
				}
			}
			if _, err := w.WriteRowGroup(buf); err != nil {
				b.Fatal(err)
			}
			buf.Reset()
		}
		w.Close()
	}
}
