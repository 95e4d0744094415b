/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: bi_decompress with btrfs compression type ZLIB.
 * Input format and invariants: see fuzz_decompress.h. Seeds in
 * fuzz/corpus/zlib/ are valid extents made by the reference library.
 */
#include "fuzz_decompress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_decompress(COMPRESS_ZLIB, data, size);
}
