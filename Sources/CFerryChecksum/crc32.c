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

// ---- Combining: the CRC of A then B from the CRCs of A and of B. ----
//
// With the register's start and final XOR both all ones, crc(A || B) =
// crc(A) · x^(8·|B|) + crc(B) over GF(2), modulo the polynomial. In the
// reflected form used here a register's bit 31 is the coefficient of x^0 and
// bit 0 that of x^31. x^(8·n) is built from the powers x^(2^k) (k = 3 for
// x^8, one more per bit of n), 64 of them so that any 64-bit length is
// covered without assuming the powers repeat.

/// a · b modulo the polynomial, both reflected.
static uint32_t multiply_modulo(uint32_t polynomial, uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t term = 1u << 31; term != 0; term >>= 1) {
        if (a & term) product ^= b;
        if ((a & (term - 1)) == 0) break;
        b = (b & 1) ? (b >> 1) ^ polynomial : b >> 1;  // b · x
    }
    return product;
}

static uint32_t powers[2][67];  // x^(2^k) modulo each polynomial
static pthread_once_t powers_once = PTHREAD_ONCE_INIT;

static void build_powers(void) {
    const uint32_t polynomials[2] = {FERRY_CRC32_IEEE, FERRY_CRC32_CASTAGNOLI};
    for (int p = 0; p < 2; p++) {
        powers[p][0] = 1u << 30;  // x^1
        for (int k = 1; k < 67; k++) powers[p][k] = multiply_modulo(polynomials[p], powers[p][k - 1], powers[p][k - 1]);
    }
}

uint32_t ferry_crc32_combine(uint32_t polynomial, uint32_t first, uint32_t second, uint64_t second_length) {
    pthread_once(&powers_once, build_powers);
    const uint32_t *table = powers[polynomial == FERRY_CRC32_CASTAGNOLI];
    uint32_t shift = 1u << 31;  // x^0
    for (int k = 3; second_length != 0; second_length >>= 1, k++)
        if (second_length & 1) shift = multiply_modulo(polynomial, table[k], shift);
    return multiply_modulo(polynomial, shift, first) ^ second;
}
