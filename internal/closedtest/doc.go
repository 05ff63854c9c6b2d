// Package closedtest checks, across the safe packages, what a caller sees
// of closed things: a call given a closed Resources refuses with
// safe.ErrClosed under the name of the operation called. It holds no code
// beyond its tests.
package closedtest
