package kmsg

import "testing"

// lineCase is one row of a kernel-line parser's table test; the tables are
// also the seed corpora of the parsers' fuzz tests.
type lineCase[T comparable] struct {
	name string
	in   string
	ok   bool
	want T
}

// checkLines runs parse (named fn in messages) over a table.
func checkLines[T comparable](t *testing.T, fn string, parse func(string) (T, bool), cases []lineCase[T]) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parse(tc.in)
			if ok != tc.ok {
				t.Fatalf("%s(%q) ok = %v, want %v (got %+v)", fn, tc.in, ok, tc.ok, got)
			}
			if ok && got != tc.want {
				t.Errorf("%s(%q)\n got  %+v\n want %+v", fn, tc.in, got, tc.want)
			}
		})
	}
}

// fuzzLines fuzzes parse (named fn in messages) from a table's lines: a
// refused line gives the zero value, and check judges every accepted one.
func fuzzLines[T comparable](f *testing.F, fn string, parse func(string) (T, bool), cases []lineCase[T], check func(t *testing.T, msg string, r T)) {
	for _, tc := range cases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		r, ok := parse(msg)
		if !ok {
			var zero T
			if r != zero {
				t.Errorf("%s(%q) not ok but returned %+v", fn, msg, r)
			}
			return
		}
		check(t, msg, r)
	})
}
