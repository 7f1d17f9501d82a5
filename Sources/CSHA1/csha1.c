// SHA-1's compression function with the x86 SHA extensions (SHA1RNDS4, SHA1NEXTE, SHA1MSG1, SHA1MSG2), for the
// name-based UUIDs of notifications (APNSCore's NotificationID). The portable Swift version stays the reference
// and the fallback; tests compare the two.
#include "csha1.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

int pb_sha1_hardware_available(void) {
    unsigned int eax, ebx, ecx, edx;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
    const int ssse3 = (ecx >> 9) & 1, sse41 = (ecx >> 19) & 1;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return 0;
    const int sha = (ebx >> 29) & 1;
    return ssse3 && sse41 && sha;
}

// Four rounds with round function `f`, then the next four rounds' E from the current ABCD and message words.
#define PB_ROUNDS(f, next_words)                        \
    do {                                                \
        __m128i before = abcd;                          \
        abcd = _mm_sha1rnds4_epu32(abcd, e, f);         \
        e = _mm_sha1nexte_epu32(before, next_words);    \
    } while (0)

__attribute__((target("sha,ssse3,sse4.1")))
void pb_sha1_compress_blocks(uint32_t state[5], const uint8_t *blocks, size_t count) {
    // Lanes hold words in reverse order (A, and message word 0, in the highest lane), as the instructions expect.
    const __m128i byte_swap = _mm_set_epi64x(0x0001020304050607LL, 0x08090a0b0c0d0e0fLL);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)state), 0x1B);
    __m128i e_start = _mm_set_epi32((int)state[4], 0, 0, 0);
    for (; count > 0; count--, blocks += 64) {
        const __m128i abcd_start = abcd;
        // The 80 message words in 20 groups of four: the first four from the block, each later one from the four
        // before it.
        __m128i w[20];
        for (int i = 0; i < 4; i++) {
            w[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(blocks + 16 * i)), byte_swap);
        }
        for (int i = 4; i < 20; i++) {
            w[i] = _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32(w[i - 4], w[i - 3]), w[i - 2]), w[i - 1]);
        }
        __m128i e = _mm_add_epi32(e_start, w[0]);
        // The round function is an immediate operand, so each group of five is written out with its own.
        for (int i = 0; i < 5; i++) PB_ROUNDS(0, w[i + 1]);
        for (int i = 5; i < 10; i++) PB_ROUNDS(1, w[i + 1]);
        for (int i = 10; i < 15; i++) PB_ROUNDS(2, w[i + 1]);
        for (int i = 15; i < 19; i++) PB_ROUNDS(3, w[i + 1]);
        // The last group: its E for "next" is the saved E of this block's start, which adds it back in.
        __m128i before = abcd;
        abcd = _mm_sha1rnds4_epu32(abcd, e, 3);
        e_start = _mm_sha1nexte_epu32(before, e_start);
        abcd = _mm_add_epi32(abcd, abcd_start);
    }
    _mm_storeu_si128((__m128i *)state, _mm_shuffle_epi32(abcd, 0x1B));
    state[4] = (uint32_t)_mm_extract_epi32(e_start, 3);
}

#else

int pb_sha1_hardware_available(void) { return 0; }

void pb_sha1_compress_blocks(uint32_t state[5], const uint8_t *blocks, size_t count) {
    (void)state;
    (void)blocks;
    (void)count;
}

#endif
