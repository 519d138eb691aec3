// Package wait is a stub of apimachinery's.
package wait

type Backoff struct{ Steps int }
