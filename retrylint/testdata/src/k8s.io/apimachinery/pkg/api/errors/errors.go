// Package errors is a stub of apimachinery's.
package errors

func IsConflict(err error) bool { return false }
func IsNotFound(err error) bool { return false }
