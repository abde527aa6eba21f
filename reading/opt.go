package reading

// Opt is an optional reading. OK false means absent: the driver refused it,
// does not support it, or did not answer in time. V is meaningful only when OK.
type Opt[T any] struct {
	V  T
	OK bool
}

// Some returns a present value.
func Some[T any](v T) Opt[T] { return Opt[T]{V: v, OK: true} }

// Get returns the value and whether it is present.
func (o Opt[T]) Get() (T, bool) { return o.V, o.OK }

// Widen returns o as the Opt[uint64] Sample.Values holds (a signed value
// as its int64's bits).
func Widen[T uint32 | int32](o Opt[T]) Opt[uint64] { return Opt[uint64]{V: uint64(o.V), OK: o.OK} }
