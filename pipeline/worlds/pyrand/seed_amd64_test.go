package pyrand

import (
	"testing"

	"golang.org/x/sys/cpu"
)

// TestDefaultKernelAMD64 checks that Batch uses the widest vector kernel the
// processor and OS support (GODEBUG=cpu.avx512f=off,cpu.avx2=off narrows
// it, which is how the fallbacks' selection can be checked by hand).
func TestDefaultKernelAMD64(t *testing.T) {
	want := "go"
	switch {
	case cpu.X86.HasAVX512F:
		want = "avx512"
	case cpu.X86.HasAVX2:
		want = "avx2"
	}
	if defaultKernel.name != want {
		t.Fatalf("default kernel %q, want %q (AVX-512F %v, AVX2 %v)",
			defaultKernel.name, want, cpu.X86.HasAVX512F, cpu.X86.HasAVX2)
	}
	t.Logf("Batch seeds with the %s kernel", defaultKernel.name)
}
