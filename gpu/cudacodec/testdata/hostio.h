// hostio.h reads and writes the host harnesses' files (deflatehost.cpp, detecthost.cpp): whole files in, whole
// buffers out, exiting with status 2 and the path on any error.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <vector>

static std::vector<unsigned char> readAll(const char* path) {
	std::vector<unsigned char> v;
	FILE* f = fopen(path, "rb");
	if (!f) { perror(path); exit(2); }
	int c;
	while ((c = fgetc(f)) != EOF) v.push_back((unsigned char)c);
	fclose(f);
	return v;
}

static void writeAll(const char* path, const void* p, size_t n) {
	FILE* f = fopen(path, "wb");
	if (!f || fwrite(p, 1, n, f) != n) { perror(path); exit(2); }
	fclose(f);
}
