/*
 * ThreadSanitizer does not intercept C11 thrd_create (compiler-rt has no
 * interceptor for it, and glibc's thrd_create calls its internal
 * pthread_create, not the interposable one). librdkafka creates all its
 * threads with thrd_create, so TSan never learns about them and crashes in
 * its allocator when they call malloc. Preloaded for TSan runs only
 * (scripts/tsan.sh), this thrd_create goes through pthread_create, which
 * TSan intercepts; and thrd_join, thrd_detach and thrd_exit likewise, so TSan
 * sees threads end (else a new thread at a reused address trips its thread
 * registry). glibc's thrd_t is a pthread_t.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

struct start { thrd_start_t func; void *arg; };

static void *trampoline(void *p) {
    struct start s = *(struct start *)p;
    free(p);
    return (void *)(intptr_t)s.func(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg) {
    struct start *s = malloc(sizeof *s);
    if (!s) return thrd_nomem;
    s->func = func;
    s->arg = arg;
    int rc = pthread_create((pthread_t *)thr, NULL, trampoline, s);
    if (rc != 0) { free(s); return thrd_error; }
    return thrd_success;
}

int thrd_join(thrd_t thr, int *result) {
    void *value = NULL;
    if (pthread_join((pthread_t)thr, &value) != 0) return thrd_error;
    if (result) *result = (int)(intptr_t)value;
    return thrd_success;
}

int thrd_detach(thrd_t thr) { return pthread_detach((pthread_t)thr) == 0 ? thrd_success : thrd_error; }

_Noreturn void thrd_exit(int result) { pthread_exit((void *)(intptr_t)result); }

/*
 * The same for C11 mutexes and condition variables: glibc implements them on
 * its internal pthread functions, so TSan would not see librdkafka hand a
 * message from one thread to another and would report the hand-over as a
 * race. glibc's mtx_t and cnd_t hold a pthread_mutex_t and pthread_cond_t.
 */
#include <errno.h>
#include <time.h>

static int thrd_result(int rc) {
    return rc == 0 ? thrd_success : rc == ETIMEDOUT ? thrd_timedout : rc == EBUSY ? thrd_busy : thrd_error;
}

int mtx_init(mtx_t *m, int type) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_RECURSIVE);
    int rc = pthread_mutex_init((pthread_mutex_t *)m, &attr);
    pthread_mutexattr_destroy(&attr);
    return thrd_result(rc);
}
int mtx_lock(mtx_t *m) { return thrd_result(pthread_mutex_lock((pthread_mutex_t *)m)); }
int mtx_trylock(mtx_t *m) { return thrd_result(pthread_mutex_trylock((pthread_mutex_t *)m)); }
int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict t) {
    return thrd_result(pthread_mutex_timedlock((pthread_mutex_t *)m, t));
}
int mtx_unlock(mtx_t *m) { return thrd_result(pthread_mutex_unlock((pthread_mutex_t *)m)); }
void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

int cnd_init(cnd_t *c) { return thrd_result(pthread_cond_init((pthread_cond_t *)c, NULL)); }
int cnd_signal(cnd_t *c) { return thrd_result(pthread_cond_signal((pthread_cond_t *)c)); }
int cnd_broadcast(cnd_t *c) { return thrd_result(pthread_cond_broadcast((pthread_cond_t *)c)); }
int cnd_wait(cnd_t *c, mtx_t *m) { return thrd_result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m)); }
int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict t) {
    return thrd_result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, t));
}
void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }
