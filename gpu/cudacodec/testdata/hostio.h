// hostio.h reads and writes the host harnesses' files (deflatehost.cpp, detecthost.cpp): whole files in, whole
// buffers out, exiting with status 2 and the path on any error.
#pragma once
#include <stdio.h>
#include <stdlib.h>

// hostFile is a whole file's bytes (data is malloc'd, never freed: a harness runs once).
struct hostFile {
	unsigned char* data;
	size_t size;
};

static hostFile readAll(const char* path) {
	FILE* f = fopen(path, "rb");
	if (!f || fseek(f, 0, SEEK_END) != 0) { perror(path); exit(2); }
	long n = ftell(f);
	if (n < 0 || fseek(f, 0, SEEK_SET) != 0) { perror(path); exit(2); }
	hostFile h = {(unsigned char*)malloc(n ? (size_t)n : 1), (size_t)n};
	if (!h.data || fread(h.data, 1, h.size, f) != h.size) { perror(path); exit(2); }
	fclose(f);
	return h;
}

static void writeAll(const char* path, const void* p, size_t n) {
	FILE* f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(2); }
}
