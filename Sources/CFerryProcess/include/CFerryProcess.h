#ifndef C_FERRY_PROCESS_H
#define C_FERRY_PROCESS_H
#include <stddef.h>

/// Bytes the C allocator has handed out and not yet taken back (glibc's
/// mallinfo2: in-use chunks of every arena plus mmapped blocks). Unlike the
/// resident size, it falls when memory is freed, so growth in it is memory held.
size_t ferry_heap_in_use_bytes(void);

/// Hands the free pages of every arena back to the kernel (glibc's
/// malloc_trim(0)); returns whether any were. Freed memory otherwise stays
/// resident in the arena of the thread that freed it.
int ferry_heap_release_free_pages(void);

/// Gives an allocation of `bytes` or more that no free space of its arena can
/// serve a mapping of its own, returned to the kernel when freed (glibc's
/// mallopt(M_MMAP_THRESHOLD)). This also ends glibc's sliding threshold, which
/// rises to the size of each mapped block freed (up to 32 MiB) and from then
/// on grows the arenas for such blocks. Returns 1 on success.
int ferry_heap_fix_mmap_threshold(size_t bytes);

/// Free bytes every arena holds, their tops included (mallinfo2's fordblks):
/// an allocation no larger than this may be served from free space.
size_t ferry_heap_free_bytes(void);

/// fallocate(fd, 0, 0, length): blocks reserved for a download's file; -1
/// where the filesystem cannot (glibc declares it only under _GNU_SOURCE).
int ferry_reserve_file_space(int fd, long long length);

#endif
