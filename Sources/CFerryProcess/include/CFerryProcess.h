#ifndef C_FERRY_PROCESS_H
#define C_FERRY_PROCESS_H
#include <stddef.h>

/// Bytes the C allocator has handed out and not yet taken back (glibc's
/// mallinfo2: in-use chunks of every arena plus mmapped blocks). Unlike the
/// resident size, it falls when memory is freed, so growth in it is memory held.
size_t ferry_heap_in_use_bytes(void);

#endif
