// MD5 (RFC 1321) for many downloads at once. One message at a time, MD5 is a
// chain of 64 dependent steps per block; eight messages fit the eight 32-bit
// lanes of an AVX2 register, so one pass of the steps advances all eight
// (the multi-buffer technique); AVX-512 does the same with fewer instructions
// per step. Eight lanes still leave the CPU waiting on each step's chain, so
// sixteen messages go twice as wide: two AVX2 chains side by side, or one
// 512-bit register. The scalar code is the same steps, unrolled.
#include "ferry_md5.h"
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

static const uint32_t K[64] = {
    0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613, 0xfd469501,
    0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193, 0xa679438e, 0x49b40821,
    0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d, 0x02441453, 0xd8a1e681, 0xe7d3fbc8,
    0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed, 0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a,
    0xfffa3942, 0x8771f681, 0x6d9d6122, 0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70,
    0x289b7ec6, 0xeaa127fa, 0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665,
    0xf4292244, 0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
    0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb, 0xeb86d391,
};

// The four rounds' functions in forms whose last operations are the ones on
// b (the value the previous step made), so the rest runs beside that step:
// F and I with one operation fewer than RFC 1321's, G as a sum (its two terms
// share no bit).
#define F1(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define F2(b, c, d) (((b) & (d)) + ((c) & ~(d)))
#define F3(b, c, d) ((b) ^ ((c) ^ (d)))
#define F4(b, c, d) ((c) ^ ((b) | ~(d)))

// The 64 steps as (round function, message word, step, rotation), in four
// steps per line with the registers rotating a, d, c, b.
#define MD5_ROUNDS(R4)                                                                                          \
    R4(F1, 0, 1, 2, 3, 0, 7, 12, 17, 22) R4(F1, 4, 5, 6, 7, 4, 7, 12, 17, 22)                                   \
    R4(F1, 8, 9, 10, 11, 8, 7, 12, 17, 22) R4(F1, 12, 13, 14, 15, 12, 7, 12, 17, 22)                            \
    R4(F2, 1, 6, 11, 0, 16, 5, 9, 14, 20) R4(F2, 5, 10, 15, 4, 20, 5, 9, 14, 20)                                \
    R4(F2, 9, 14, 3, 8, 24, 5, 9, 14, 20) R4(F2, 13, 2, 7, 12, 28, 5, 9, 14, 20)                                \
    R4(F3, 5, 8, 11, 14, 32, 4, 11, 16, 23) R4(F3, 1, 4, 7, 10, 36, 4, 11, 16, 23)                              \
    R4(F3, 13, 0, 3, 6, 40, 4, 11, 16, 23) R4(F3, 9, 12, 15, 2, 44, 4, 11, 16, 23)                              \
    R4(F4, 0, 7, 14, 5, 48, 6, 10, 15, 21) R4(F4, 12, 3, 10, 1, 52, 6, 10, 15, 21)                              \
    R4(F4, 8, 15, 6, 13, 56, 6, 10, 15, 21) R4(F4, 4, 11, 2, 9, 60, 6, 10, 15, 21)

void ferry_md5_init(ferry_md5_state *state) {
    state->h[0] = 0x67452301;
    state->h[1] = 0xefcdab89;
    state->h[2] = 0x98badcfe;
    state->h[3] = 0x10325476;
}

static inline uint32_t little_endian_word(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void ferry_md5_blocks(ferry_md5_state *state, const void *data, size_t blocks) {
    const uint8_t *p = data;
    uint32_t a0 = state->h[0], b0 = state->h[1], c0 = state->h[2], d0 = state->h[3];
    for (; blocks > 0; blocks--, p += 64) {
        uint32_t M[16];
        for (int i = 0; i < 16; i++) M[i] = little_endian_word(p + 4 * i);
        uint32_t a = a0, b = b0, c = c0, d = d0;
#define ROTL(x, s) (((x) << (s)) | ((x) >> (32 - (s))))
#define STEP(f, a, b, c, d, g, i, s) a = b + ROTL(f(b, c, d) + (a + (M[g] + K[i])), s);
#define R4(f, g0, g1, g2, g3, i, s0, s1, s2, s3) \
    STEP(f, a, b, c, d, g0, i, s0) STEP(f, d, a, b, c, g1, i + 1, s1) STEP(f, c, d, a, b, g2, i + 2, s2) STEP(f, b, c, d, a, g3, i + 3, s3)
        MD5_ROUNDS(R4)
#undef R4
#undef STEP
#undef ROTL
        a0 += a; b0 += b; c0 += c; d0 += d;
    }
    state->h[0] = a0; state->h[1] = b0; state->h[2] = c0; state->h[3] = d0;
}

void ferry_md5_finish(ferry_md5_state *state, const void *tail, size_t tail_length, uint64_t total_length,
                      uint8_t digest[16]) {
    uint8_t last[128] = {0};
    if (tail_length > 0) memcpy(last, tail, tail_length);
    last[tail_length] = 0x80;
    size_t blocks = tail_length + 1 + 8 <= 64 ? 1 : 2;
    uint64_t bits = total_length * 8;
    for (int i = 0; i < 8; i++) last[blocks * 64 - 8 + i] = (uint8_t)(bits >> (8 * i));
    ferry_md5_blocks(state, last, blocks);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) digest[4 * i + j] = (uint8_t)(state->h[i] >> (8 * j));
}

#if defined(__x86_64__)
static int detected = -1;

static int detect(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE) || !(c & bit_AVX)) return FERRY_MD5_SCALAR;
    // The OS saves the YMM registers on a context switch (XCR0 bits 1 and 2),
    // and for AVX-512 also the opmask and ZMM registers (bits 5, 6 and 7).
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & 6) != 6 || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX2)) return FERRY_MD5_SCALAR;
    if ((lo & 0xE6) == 0xE6 && (b & bit_AVX512F) && (b & bit_AVX512VL)) return FERRY_MD5_AVX512;
    return FERRY_MD5_AVX2;
}

int ferry_md5_vector(void) {
    // A benign race: every thread that sees -1 computes the same answer.
    int vector = __atomic_load_n(&detected, __ATOMIC_RELAXED);
    if (vector < 0) {
        vector = detect();
        __atomic_store_n(&detected, vector, __ATOMIC_RELAXED);
    }
    return vector;
}

typedef __m256i V;

// Eight rows of eight words (one row per message) into eight columns (one per word).
__attribute__((target("avx2"))) static inline void transpose8(V r[8]) {
    V t0 = _mm256_unpacklo_epi32(r[0], r[1]), t1 = _mm256_unpackhi_epi32(r[0], r[1]);
    V t2 = _mm256_unpacklo_epi32(r[2], r[3]), t3 = _mm256_unpackhi_epi32(r[2], r[3]);
    V t4 = _mm256_unpacklo_epi32(r[4], r[5]), t5 = _mm256_unpackhi_epi32(r[4], r[5]);
    V t6 = _mm256_unpacklo_epi32(r[6], r[7]), t7 = _mm256_unpackhi_epi32(r[6], r[7]);
    V u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    V u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    V u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
    V u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
    r[0] = _mm256_permute2x128_si256(u0, u4, 0x20); r[4] = _mm256_permute2x128_si256(u0, u4, 0x31);
    r[1] = _mm256_permute2x128_si256(u1, u5, 0x20); r[5] = _mm256_permute2x128_si256(u1, u5, 0x31);
    r[2] = _mm256_permute2x128_si256(u2, u6, 0x20); r[6] = _mm256_permute2x128_si256(u2, u6, 0x31);
    r[3] = _mm256_permute2x128_si256(u3, u7, 0x20); r[7] = _mm256_permute2x128_si256(u3, u7, 0x31);
}

// The body of an eight-lane function, around its STEP: the lanes' states
// gathered into four registers, each block's sixteen words transposed into
// one register per word (x86 is little-endian, as MD5's words are), the 64
// steps, and the states scattered back. Lanes may repeat a state: every lane
// computed the same value for it.
#define X8_BODY(STEP)                                                                                           \
    uint32_t h[4][8];                                                                                           \
    for (int lane = 0; lane < 8; lane++)                                                                        \
        for (int i = 0; i < 4; i++) h[i][lane] = states[lane]->h[i];                                            \
    V a0 = _mm256_loadu_si256((const V *)h[0]), b0 = _mm256_loadu_si256((const V *)h[1]);                       \
    V c0 = _mm256_loadu_si256((const V *)h[2]), d0 = _mm256_loadu_si256((const V *)h[3]);                       \
    const uint8_t *p[8];                                                                                        \
    for (int lane = 0; lane < 8; lane++) p[lane] = data[lane];                                                  \
    for (size_t block = 0; block < blocks; block++) {                                                           \
        V M[16];                                                                                                \
        for (int lane = 0; lane < 8; lane++) M[lane] = _mm256_loadu_si256((const V *)(p[lane] + 64 * block));   \
        transpose8(M);                                                                                          \
        for (int lane = 0; lane < 8; lane++)                                                                    \
            M[8 + lane] = _mm256_loadu_si256((const V *)(p[lane] + 64 * block + 32));                           \
        transpose8(M + 8);                                                                                      \
        V a = a0, b = b0, c = c0, d = d0;                                                                       \
        MD5_ROUNDS(STEP##4)                                                                                     \
        a0 = _mm256_add_epi32(a0, a); b0 = _mm256_add_epi32(b0, b);                                             \
        c0 = _mm256_add_epi32(c0, c); d0 = _mm256_add_epi32(d0, d);                                             \
    }                                                                                                           \
    _mm256_storeu_si256((V *)h[0], a0); _mm256_storeu_si256((V *)h[1], b0);                                     \
    _mm256_storeu_si256((V *)h[2], c0); _mm256_storeu_si256((V *)h[3], d0);                                     \
    for (int lane = 0; lane < 8; lane++)                                                                        \
        for (int i = 0; i < 4; i++) states[lane]->h[i] = h[i][lane];

#define ADD _mm256_add_epi32
#define KM(g, i) ADD(M[g], _mm256_set1_epi32((int)K[i]))

// AVX2. Each step's chain runs through b only: what needs a, c, d and the
// message is computed beside it. G and I use the forms (b & d) + (c & ~d)
// (the two terms share no bit) and c ^ (b | ~d) with ~d ready beforehand.
#define VF1(t, b, c, d) ADD(t, _mm256_xor_si256(d, _mm256_and_si256(b, _mm256_xor_si256(c, d))))
#define VF2(t, b, c, d) ADD(ADD(t, _mm256_andnot_si256(d, c)), _mm256_and_si256(b, d))
#define VF3(t, b, c, d) ADD(t, _mm256_xor_si256(b, _mm256_xor_si256(c, d)))
#define VF4(t, b, c, d) ADD(t, _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, _mm256_set1_epi32(-1)))))
#define VROTL(x, s) _mm256_or_si256(_mm256_slli_epi32(x, s), _mm256_srli_epi32(x, 32 - (s)))
#define VSTEP(f, a, b, c, d, g, i, s) a = ADD(b, VROTL(V##f(ADD(a, KM(g, i)), b, c, d), s));
#define VSTEP4(f, g0, g1, g2, g3, i, s0, s1, s2, s3) \
    VSTEP(f, a, b, c, d, g0, i, s0) VSTEP(f, d, a, b, c, g1, i + 1, s1) VSTEP(f, c, d, a, b, g2, i + 2, s2) VSTEP(f, b, c, d, a, g3, i + 3, s3)

__attribute__((target("avx2"))) static void blocks_x8_avx2(ferry_md5_state *const states[8],
                                                           const void *const data[8], size_t blocks) {
    X8_BODY(VSTEP)
}

// Sixteen lanes on AVX2: two sets of eight, each step written for both, so
// one set's step runs while the other's waits on its chain (the eight-lane
// kernel leaves the vector units idle for most of each step's latency).
// Measured on Zen 4 (Benchmarks/md5_kernels.c: clang -O2, chunks of 256 KiB):
// 4.8 GB/s for eight lanes, 6.5 GB/s for sixteen.
#define VSTEP2(f, a, b, c, d, g, i, s)                                                                          \
    a##0 = ADD(b##0, VROTL(V##f(ADD(a##0, KM0(g, i)), b##0, c##0, d##0), s));                                   \
    a##1 = ADD(b##1, VROTL(V##f(ADD(a##1, KM1(g, i)), b##1, c##1, d##1), s));
#define VSTEP24(f, g0, g1, g2, g3, i, s0, s1, s2, s3) \
    VSTEP2(f, a, b, c, d, g0, i, s0) VSTEP2(f, d, a, b, c, g1, i + 1, s1) VSTEP2(f, c, d, a, b, g2, i + 2, s2) VSTEP2(f, b, c, d, a, g3, i + 3, s3)
#define KM0(g, i) ADD(M0[g], _mm256_set1_epi32((int)K[i]))
#define KM1(g, i) ADD(M1[g], _mm256_set1_epi32((int)K[i]))

// The eight lanes starting at `first` of a sixteen-lane call: the words of
// one block, transposed into one register per word.
__attribute__((target("avx2"))) static inline void load_words8(V M[16], const uint8_t *const p[16], int first, size_t block) {
    for (int lane = 0; lane < 8; lane++) M[lane] = _mm256_loadu_si256((const V *)(p[first + lane] + 64 * block));
    transpose8(M);
    for (int lane = 0; lane < 8; lane++) M[8 + lane] = _mm256_loadu_si256((const V *)(p[first + lane] + 64 * block + 32));
    transpose8(M + 8);
}

__attribute__((target("avx2"))) static void blocks_x16_avx2(ferry_md5_state *const states[16],
                                                            const void *const data[16], size_t blocks) {
    uint32_t h[4][16];
    for (int lane = 0; lane < 16; lane++)
        for (int i = 0; i < 4; i++) h[i][lane] = states[lane]->h[i];
    V a00 = _mm256_loadu_si256((const V *)h[0]), b00 = _mm256_loadu_si256((const V *)h[1]);
    V c00 = _mm256_loadu_si256((const V *)h[2]), d00 = _mm256_loadu_si256((const V *)h[3]);
    V a01 = _mm256_loadu_si256((const V *)(h[0] + 8)), b01 = _mm256_loadu_si256((const V *)(h[1] + 8));
    V c01 = _mm256_loadu_si256((const V *)(h[2] + 8)), d01 = _mm256_loadu_si256((const V *)(h[3] + 8));
    const uint8_t *p[16];
    for (int lane = 0; lane < 16; lane++) p[lane] = data[lane];
    for (size_t block = 0; block < blocks; block++) {
        V M0[16], M1[16];
        load_words8(M0, p, 0, block);
        load_words8(M1, p, 8, block);
        V a0 = a00, b0 = b00, c0 = c00, d0 = d00, a1 = a01, b1 = b01, c1 = c01, d1 = d01;
        MD5_ROUNDS(VSTEP24)
        a00 = ADD(a00, a0); b00 = ADD(b00, b0); c00 = ADD(c00, c0); d00 = ADD(d00, d0);
        a01 = ADD(a01, a1); b01 = ADD(b01, b1); c01 = ADD(c01, c1); d01 = ADD(d01, d1);
    }
    _mm256_storeu_si256((V *)h[0], a00); _mm256_storeu_si256((V *)h[1], b00);
    _mm256_storeu_si256((V *)h[2], c00); _mm256_storeu_si256((V *)h[3], d00);
    _mm256_storeu_si256((V *)(h[0] + 8), a01); _mm256_storeu_si256((V *)(h[1] + 8), b01);
    _mm256_storeu_si256((V *)(h[2] + 8), c01); _mm256_storeu_si256((V *)(h[3] + 8), d01);
    for (int lane = 0; lane < 16; lane++)
        for (int i = 0; i < 4; i++) states[lane]->h[i] = h[i][lane];
}

// AVX-512 (on 256-bit registers, VL): each round function is one ternary-logic
// instruction (its truth table as the immediate, for b, c, d = 0xF0, 0xCC,
// 0xAA) and each rotation one, where AVX2 takes two to four and three.
#define TF1 0xCA /* (b & c) | (~b & d) */
#define TF2 0xE4 /* (b & d) | (c & ~d) */
#define TF3 0x96 /* b ^ c ^ d */
#define TF4 0x39 /* c ^ (b | ~d) */

// a + M[g] + K[i], the part of a step that does not wait for the step before.
// The empty asm keeps the compiler from reassociating the sum so that the
// round function's result (which does wait) meets three adds instead of one:
// 1.19x the speed of the reassociated form, measured on Zen 4 (AVX2's
// chain gains nothing from it).
__attribute__((always_inline, target("avx512f,avx512vl"))) static inline V off_chain(V a, V m, uint32_t k) {
    V t = ADD(a, ADD(m, _mm256_set1_epi32((int)k)));
    __asm__("" : "+v"(t));
    return t;
}
#define ZSTEP(f, a, b, c, d, g, i, s) \
    a = ADD(b, _mm256_rol_epi32(ADD(off_chain(a, M[g], K[i]), _mm256_ternarylogic_epi32(b, c, d, T##f)), s));
#define ZSTEP4(f, g0, g1, g2, g3, i, s0, s1, s2, s3) \
    ZSTEP(f, a, b, c, d, g0, i, s0) ZSTEP(f, d, a, b, c, g1, i + 1, s1) ZSTEP(f, c, d, a, b, g2, i + 2, s2) ZSTEP(f, b, c, d, a, g3, i + 3, s3)

__attribute__((target("avx512f,avx512vl"))) static void blocks_x8_avx512(ferry_md5_state *const states[8],
                                                                         const void *const data[8], size_t blocks) {
    X8_BODY(ZSTEP)
}

// Sixteen lanes in one 512-bit register: the same steps as ZSTEP. On Zen 4 a
// 512-bit operation takes two 256-bit halves' throughput but no more latency,
// and the eight-lane kernel waits on latency: 5.7 GB/s for eight lanes,
// 9.2 GB/s for sixteen, measured as above.
typedef __m512i W;
#define WADD _mm512_add_epi32

__attribute__((always_inline, target("avx512f"))) static inline W off_chain16(W a, W m, uint32_t k) {
    W t = WADD(a, WADD(m, _mm512_set1_epi32((int)k)));
    __asm__("" : "+v"(t));
    return t;
}
#define WSTEP(f, a, b, c, d, g, i, s) \
    a = WADD(b, _mm512_rol_epi32(WADD(off_chain16(a, M[g], K[i]), _mm512_ternarylogic_epi32(b, c, d, T##f)), s));
#define WSTEP4(f, g0, g1, g2, g3, i, s0, s1, s2, s3) \
    WSTEP(f, a, b, c, d, g0, i, s0) WSTEP(f, d, a, b, c, g1, i + 1, s1) WSTEP(f, c, d, a, b, g2, i + 2, s2) WSTEP(f, b, c, d, a, g3, i + 3, s3)

// Sixteen rows of sixteen words (one block of each message) into sixteen
// columns (one word of every message): pairs of words, then quads, then
// 128-bit quarters, then halves.
__attribute__((always_inline, target("avx512f"))) static inline void transpose16(W r[16]) {
    W t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xDD);
    }
}

__attribute__((target("avx512f"))) static void blocks_x16_avx512(ferry_md5_state *const states[16],
                                                                 const void *const data[16], size_t blocks) {
    uint32_t h[4][16];
    for (int lane = 0; lane < 16; lane++)
        for (int i = 0; i < 4; i++) h[i][lane] = states[lane]->h[i];
    W a0 = _mm512_loadu_si512(h[0]), b0 = _mm512_loadu_si512(h[1]);
    W c0 = _mm512_loadu_si512(h[2]), d0 = _mm512_loadu_si512(h[3]);
    for (size_t block = 0; block < blocks; block++) {
        W M[16];
        for (int lane = 0; lane < 16; lane++) M[lane] = _mm512_loadu_si512((const uint8_t *)data[lane] + 64 * block);
        transpose16(M);
        W a = a0, b = b0, c = c0, d = d0;
        MD5_ROUNDS(WSTEP4)
        a0 = WADD(a0, a); b0 = WADD(b0, b); c0 = WADD(c0, c); d0 = WADD(d0, d);
    }
    _mm512_storeu_si512(h[0], a0); _mm512_storeu_si512(h[1], b0);
    _mm512_storeu_si512(h[2], c0); _mm512_storeu_si512(h[3], d0);
    for (int lane = 0; lane < 16; lane++)
        for (int i = 0; i < 4; i++) states[lane]->h[i] = h[i][lane];
}
#else
int ferry_md5_vector(void) { return FERRY_MD5_SCALAR; }
#endif

int ferry_md5_lanes(void) { return ferry_md5_vector() == FERRY_MD5_SCALAR ? 0 : 16; }

// Each distinct state once: lanes that repeat a state (a batch of fewer files
// than lanes) must not advance it twice.
static void blocks_scalar(ferry_md5_state *const states[], const void *const data[], int lanes, size_t blocks) {
    for (int lane = 0; lane < lanes; lane++) {
        int seen = 0;
        for (int other = 0; other < lane; other++) seen |= states[other] == states[lane];
        if (!seen) ferry_md5_blocks(states[lane], data[lane], blocks);
    }
}

void ferry_md5_blocks_x8_with(int vector, ferry_md5_state *const states[8], const void *const data[8], size_t blocks) {
#if defined(__x86_64__)
    int available = ferry_md5_vector();
    if (vector == FERRY_MD5_AVX512 && available == FERRY_MD5_AVX512) return blocks_x8_avx512(states, data, blocks);
    if (vector >= FERRY_MD5_AVX2 && available >= FERRY_MD5_AVX2) return blocks_x8_avx2(states, data, blocks);
#endif
    (void)vector;
    blocks_scalar(states, data, 8, blocks);
}

void ferry_md5_blocks_x8(ferry_md5_state *const states[8], const void *const data[8], size_t blocks) {
    ferry_md5_blocks_x8_with(ferry_md5_vector(), states, data, blocks);
}

void ferry_md5_blocks_x16_with(int vector, ferry_md5_state *const states[16], const void *const data[16], size_t blocks) {
#if defined(__x86_64__)
    int available = ferry_md5_vector();
    if (vector == FERRY_MD5_AVX512 && available == FERRY_MD5_AVX512) return blocks_x16_avx512(states, data, blocks);
    if (vector >= FERRY_MD5_AVX2 && available >= FERRY_MD5_AVX2) return blocks_x16_avx2(states, data, blocks);
#endif
    (void)vector;
    blocks_scalar(states, data, 16, blocks);
}

void ferry_md5_blocks_x16(ferry_md5_state *const states[16], const void *const data[16], size_t blocks) {
    ferry_md5_blocks_x16_with(ferry_md5_vector(), states, data, blocks);
}
