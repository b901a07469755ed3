#ifndef C_FERRY_CRC32_H
#define C_FERRY_CRC32_H
#include <stddef.h>
#include <stdint.h>

/// The two CRC-32 polynomials S3 uses, bit-reflected.
#define FERRY_CRC32_IEEE 0xEDB88320u
#define FERRY_CRC32_CASTAGNOLI 0x82F63B78u

/// Advances a running CRC register (start at 0xFFFFFFFF, finish by XOR with
/// 0xFFFFFFFF) over `length` bytes. CRC-32C uses the CPU's CRC32 instruction
/// where there is one (x86-64 SSE 4.2, AArch64 CRC); everything else is
/// table-driven, eight bytes per step.
uint32_t ferry_crc32_update(uint32_t polynomial, uint32_t crc, const void *bytes, size_t length);

/// The same on tables only, whatever the CPU: what the tests hold the
/// instruction path to.
uint32_t ferry_crc32_update_tables(uint32_t polynomial, uint32_t crc, const void *bytes, size_t length);

/// 1 when CRC-32C runs on the CPU's instruction, 0 when on tables.
int ferry_crc32c_hardware(void);

/// The checksum of A followed by B, from A's checksum, B's checksum and B's
/// length in bytes (finished values: the register XORed with 0xFFFFFFFF, as
/// S3 sends them), without reading either again. `polynomial` is
/// FERRY_CRC32_IEEE or FERRY_CRC32_CASTAGNOLI. A few microseconds, whatever
/// the length: parts checksummed as they stream make the whole object's.
uint32_t ferry_crc32_combine(uint32_t polynomial, uint32_t first, uint32_t second, uint64_t second_length);

#endif
