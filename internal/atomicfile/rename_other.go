//go:build !linux

package atomicfile

func renameNoReplace(from, to string) error { return renameIfAbsent(from, to) }
