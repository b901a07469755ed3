#include "ferry_crc32.h"
#include <pthread.h>
#include <string.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

// ---- Tables: slicing-by-8 for both polynomials, built once. ----

static uint32_t tables[2][8][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build(uint32_t (*t)[256], uint32_t polynomial) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int bit = 0; bit < 8; bit++) crc = (crc & 1) ? (crc >> 1) ^ polynomial : crc >> 1;
        t[0][i] = crc;
    }
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
}

static void build_tables(void) {
    build(tables[0], FERRY_CRC32_IEEE);
    build(tables[1], FERRY_CRC32_CASTAGNOLI);
}

static uint32_t update_tables(uint32_t (*t)[256], uint32_t crc, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
        lo ^= crc;
        crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24]
            ^ t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    }
    while (n--) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

// ---- CRC-32C on the CPU's instruction. ----

#if defined(__x86_64__)
static int hardware = -1;

static int detect(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2) ? 1 : 0;
}

__attribute__((target("sse4.2")))
static uint32_t update_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--) c32 = _mm_crc32_u8(c32, *p++);
    return c32;
}
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
static int hardware = 1;
static int detect(void) { return 1; }

static uint32_t update_hardware(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __crc32cd(crc, word);
    }
    while (n--) crc = __crc32cb(crc, *p++);
    return crc;
}
#else
static int hardware = 0;
static int detect(void) { return 0; }
static uint32_t update_hardware(uint32_t crc, const uint8_t *p, size_t n) { (void)p; (void)n; return crc; }
#endif

int ferry_crc32c_hardware(void) {
    // A benign race: every thread that sees -1 computes the same answer.
    int h = __atomic_load_n(&hardware, __ATOMIC_RELAXED);
    if (h < 0) {
        h = detect();
        __atomic_store_n(&hardware, h, __ATOMIC_RELAXED);
    }
    return h;
}

uint32_t ferry_crc32_update(uint32_t polynomial, uint32_t crc, const void *bytes, size_t length) {
    if (polynomial == FERRY_CRC32_CASTAGNOLI && ferry_crc32c_hardware())
        return update_hardware(crc, bytes, length);
    return ferry_crc32_update_tables(polynomial, crc, bytes, length);
}

uint32_t ferry_crc32_update_tables(uint32_t polynomial, uint32_t crc, const void *bytes, size_t length) {
    pthread_once(&tables_once, build_tables);
    return update_tables(tables[polynomial == FERRY_CRC32_CASTAGNOLI], crc, bytes, length);
}
