module github.com/statesidecar/state

go 1.26

require (
	github.com/google/btree v1.1.3 // indirect
	github.com/matryer/is v1.4.1 // indirect
)
