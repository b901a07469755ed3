// MD5 kernels side by side: GB/s of hashed bytes per CPU-second (the thread's
// own CPU time, so the machine's other load moves the figures less) for the
// scalar steps and each vector set this CPU has, eight lanes and sixteen.
// Best of 7 runs of 64 MiB per lane set. Checks every kernel against the
// scalar steps first.
//   cc -O2 -I Sources/CFerryChecksum/include Benchmarks/md5_kernels.c Sources/CFerryChecksum/md5.c -o /tmp/md5_kernels
//   /tmp/md5_kernels
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ferry_md5.h"

enum { CHUNK = 256 << 10 };  // what MD5Lanes hashes of each file per batch

static double thread_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void run(int vector, int width, ferry_md5_state *const *states, const void *const *data) {
    if (width == 16) ferry_md5_blocks_x16_with(vector, (ferry_md5_state *const *)states, data, CHUNK / 64);
    else ferry_md5_blocks_x8_with(vector, (ferry_md5_state *const *)states, data, CHUNK / 64);
}

int main(void) {
    unsigned char *buffers[16];
    const void *data[16];
    ferry_md5_state states[16], *pointers[16];
    srand(1321);
    for (int i = 0; i < 16; i++) {
        buffers[i] = aligned_alloc(64, CHUNK);
        for (int j = 0; j < CHUNK; j++) buffers[i][j] = (unsigned char)rand();
        data[i] = buffers[i];
        pointers[i] = &states[i];
    }
    const char *names[] = {"scalar", "AVX2", "AVX-512"};
    printf("this CPU: %s, %d lanes\n", names[ferry_md5_vector()], ferry_md5_lanes());
    for (int vector = 0; vector <= ferry_md5_vector(); vector++) {
        for (int width = 8; width <= 16; width += 8) {
            ferry_md5_state expected[16];
            for (int i = 0; i < 16; i++) {
                ferry_md5_init(&states[i]);
                ferry_md5_init(&expected[i]);
                ferry_md5_blocks(&expected[i], data[i], CHUNK / 64);
            }
            run(vector, width, pointers, data);
            if (memcmp(states, expected, sizeof(ferry_md5_state) * width) != 0) {
                printf("%s x%d: WRONG DIGESTS\n", names[vector], width);
                return 1;
            }
            int reps = (64 << 20) / CHUNK / (vector == 0 ? 8 : 1);
            double best = 1e9;
            for (int round = 0; round < 7; round++) {
                double start = thread_seconds();
                for (int r = 0; r < reps; r++) run(vector, width, pointers, data);
                double took = thread_seconds() - start;
                if (took < best) best = took;
            }
            double bytes = (double)width * CHUNK * reps;
            printf("%-8s x%-2d %6.2f GB/s  (%.3f ms per batch of %d chunks of 256 KiB)\n", names[vector], width,
                   bytes / best / 1e9, best / reps * 1e3, width);
        }
    }
    return 0;
}
