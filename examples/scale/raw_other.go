//go:build !linux

package main

// hugeSlab returns n zero bytes; only Linux is asked for huge pages.
func hugeSlab(n int) ([]byte, bool, error) { return make([]byte, n), false, nil }

// freeSlab leaves a slab of hugeSlab to the collector.
func freeSlab([]byte) error { return nil }

// hugePages says nothing outside Linux.
func hugePages() string { return "" }
