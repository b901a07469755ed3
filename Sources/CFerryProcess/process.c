#define _GNU_SOURCE
#include "CFerryProcess.h"
#include <malloc.h>

size_t ferry_heap_in_use_bytes(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}

int ferry_heap_release_free_pages(void) {
    return malloc_trim(0);
}

int ferry_heap_fix_mmap_threshold(size_t bytes) {
    return mallopt(M_MMAP_THRESHOLD, (int)bytes);
}

size_t ferry_heap_free_bytes(void) {
    return mallinfo2().fordblks;
}

#include <fcntl.h>
int ferry_reserve_file_space(int fd, long long length) { return fallocate(fd, 0, 0, (off_t)length); }
