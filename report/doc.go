// Package report reads what the logger wrote (the daily CSVs, plain or
// gzip-compressed, events.log and its rotated copies, the crash snapshots)
// and tells the story of one incident: a timeline of the window before it,
// with the GPU's readings at every change, the peaks, and the known
// precursors of a GSP crash that were found. WriteText prints it; WriteHTML
// writes one self-contained page with SVG charts on a shared time axis.
//
// It only reads files. A CSV day is entered by binary search on its
// timestamps, so a minute out of a day of 100 ms rows for 8 GPUs costs a few
// reads; a compressed day is streamed.
package report
