#include "CFerryProcess.h"
#include <malloc.h>

size_t ferry_heap_in_use_bytes(void) {
    struct mallinfo2 info = mallinfo2();
    return info.uordblks + info.hblkhd;
}
