package sweep

// LayoutRedos is layoutRedos for the external tests.
func LayoutRedos() int64 { return layoutRedos.Load() }
