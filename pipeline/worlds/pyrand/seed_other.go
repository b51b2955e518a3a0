//go:build !amd64

package pyrand

func kernels() []kernel {
	return []kernel{{"go", seedGo}}
}
