#ifndef C_FERRY_MD5_H
#define C_FERRY_MD5_H
#include <stddef.h>
#include <stdint.h>

/// MD5's chaining value (RFC 1321's A, B, C, D).
typedef struct { uint32_t h[4]; } ferry_md5_state;

/// The initial chaining value.
void ferry_md5_init(ferry_md5_state *state);

/// Advances one message by `blocks` 64-byte blocks.
void ferry_md5_blocks(ferry_md5_state *state, const void *data, size_t blocks);

/// The vector instructions `ferry_md5_blocks_x8` uses on this CPU.
enum { FERRY_MD5_SCALAR = 0, FERRY_MD5_AVX2 = 1, FERRY_MD5_AVX512 = 2 };
int ferry_md5_vector(void);

/// How many messages the widest kernel advances at once on this CPU: 16
/// (`ferry_md5_blocks_x16`) where AVX2 is available (and enabled by the OS),
/// else 0.
int ferry_md5_lanes(void);

/// Advances eight independent messages by `blocks` blocks each, one message
/// per 32-bit lane of a vector register (AVX2, or AVX-512 on 256-bit
/// registers where the CPU has it): the same work as eight calls of
/// `ferry_md5_blocks`, several times faster. Only when `ferry_md5_lanes()` is not 0.
/// A lane not needed can repeat another lane's arguments (state and data).
void ferry_md5_blocks_x8(ferry_md5_state *const states[8], const void *const data[8], size_t blocks);

/// The same with the instructions of `vector` (a FERRY_MD5_ value), or the
/// best below it that this CPU has: for tests and measurements of each.
void ferry_md5_blocks_x8_with(int vector, ferry_md5_state *const states[8], const void *const data[8], size_t blocks);

/// The same for sixteen messages: two eight-lane AVX2 chains side by side, or
/// one 512-bit register with AVX-512. A call costs about what two eight-lane
/// calls cost in instructions but runs in 0.6–0.75 of their time (the
/// eight-lane kernel waits on each step's latency): worth it for nine or more
/// messages. A lane not needed can repeat another lane's arguments.
void ferry_md5_blocks_x16(ferry_md5_state *const states[16], const void *const data[16], size_t blocks);

/// `ferry_md5_blocks_x16` with the instructions of `vector`, or the best
/// below it that this CPU has.
void ferry_md5_blocks_x16_with(int vector, ferry_md5_state *const states[16], const void *const data[16], size_t blocks);

/// The digest: the last `tail_length` (< 64) bytes of a message of
/// `total_length` bytes, padded, then the chaining value as 16 bytes.
void ferry_md5_finish(ferry_md5_state *state, const void *tail, size_t tail_length, uint64_t total_length,
                      uint8_t digest[16]);

#endif
