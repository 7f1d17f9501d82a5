#ifndef PUSHBRIDGE_CSHA1_H
#define PUSHBRIDGE_CSHA1_H

#include <stddef.h>
#include <stdint.h>

/// 1 when this CPU has the SHA extensions (and SSSE3 and SSE4.1) that pb_sha1_compress_blocks needs; 0
/// otherwise, and always 0 off x86-64.
int pb_sha1_hardware_available(void);

/// SHA-1's compression function over `count` 64-byte blocks at `blocks`, updating `state` (A to E). Call only
/// when pb_sha1_hardware_available() returned 1.
void pb_sha1_compress_blocks(uint32_t state[5], const uint8_t *blocks, size_t count);

#endif
