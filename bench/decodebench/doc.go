// Package decodebench measures what the decode limits save: the CPU of a JPEG with thousands of scans before and
// after the scan limit, and the memory of detection on an extreme-aspect image with and without the bounded
// region (docs/operations.md, "Decode budgets"). It holds benchmarks only; results are in bench/README.md.
package decodebench
