// Linked into every executable of `make tsan`'s build (mk/fuzz.mk, docs/fuzzing.md "ThreadSanitizer"): its
// definitions take the place of glibc's and libswiftSynchronization's for the whole process. It makes two kinds of
// synchronisation that ThreadSanitizer cannot see on Linux visible to it, so that its reports are about races,
// not about its blind spots. It changes no behaviour: every function forwards to what it replaces.
//
// 1. C11 threads (librdkafka). librdkafka creates its threads with glibc's thrd_create and locks with mtx_lock
//    and cnd_wait. glibc implements them by calling its internal pthread functions directly, past
//    ThreadSanitizer's pthread interceptors: the threads are unknown to it (the test process dies with "SEGV on
//    unknown address 0xc38 ... nested bug in the same thread" as soon as one of them calls malloc) and their
//    locks are invisible. Here they go through the public pthread functions, which ThreadSanitizer intercepts.
//    glibc's mtx_t, cnd_t and once_flag are the pthread types under other names, and its C11 functions are
//    exactly these calls.
//
// 2. Swift's Synchronization.Mutex. Its uncontended lock and unlock are atomics inlined into our (instrumented)
//    code, which ThreadSanitizer sees; its contended paths (_lockSlow, _unlockSlow) hand the lock over with
//    futex system calls in libswiftSynchronization.so, which it does not. Every Mutex-protected state then shows
//    as "Swift access race" as soon as two threads contend. The wrappers tell ThreadSanitizer that the handle's
//    address is acquired after _lockSlow and released before _unlockSlow: the same address the inlined atomics
//    use, so the happens-before edges are complete.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

// Weak, so that the object also links (and does nothing more than forward) without ThreadSanitizer.
void __tsan_acquire(void *address) __attribute__((weak));
void __tsan_release(void *address) __attribute__((weak));

static void *next_symbol(const char *name) {
    void *symbol = dlsym(RTLD_NEXT, name);
    if (symbol == NULL) abort();
    return symbol;
}

// MARK: C11 threads

struct start {
    thrd_start_t function;
    void *argument;
};

static void *trampoline(void *context) {
    struct start start = *(struct start *)context;
    free(context);
    return (void *)(intptr_t)start.function(start.argument);
}

int thrd_create(thrd_t *thread, thrd_start_t function, void *argument) {
    struct start *start = malloc(sizeof *start);
    if (start == NULL) return thrd_nomem;
    start->function = function;
    start->argument = argument;
    int error = pthread_create((pthread_t *)thread, NULL, trampoline, start);
    if (error != 0) {
        free(start);
        return error == ENOMEM ? thrd_nomem : thrd_error;
    }
    return thrd_success;
}

int thrd_join(thrd_t thread, int *result) {
    void *value;
    if (pthread_join((pthread_t)thread, &value) != 0) return thrd_error;
    if (result != NULL) *result = (int)(intptr_t)value;
    return thrd_success;
}

int thrd_detach(thrd_t thread) { return pthread_detach((pthread_t)thread) == 0 ? thrd_success : thrd_error; }

int mtx_init(mtx_t *mutex, int type) {
    pthread_mutexattr_t attributes;
    pthread_mutexattr_init(&attributes);
    if (type & mtx_recursive) pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_RECURSIVE);
    int error = pthread_mutex_init((pthread_mutex_t *)mutex, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return error == 0 ? thrd_success : thrd_error;
}

int mtx_lock(mtx_t *mutex) { return pthread_mutex_lock((pthread_mutex_t *)mutex) == 0 ? thrd_success : thrd_error; }

int mtx_trylock(mtx_t *mutex) {
    int error = pthread_mutex_trylock((pthread_mutex_t *)mutex);
    return error == 0 ? thrd_success : error == EBUSY ? thrd_busy : thrd_error;
}

int mtx_timedlock(mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    int error = pthread_mutex_timedlock((pthread_mutex_t *)mutex, deadline);
    return error == 0 ? thrd_success : error == ETIMEDOUT ? thrd_timedout : thrd_error;
}

int mtx_unlock(mtx_t *mutex) {
    return pthread_mutex_unlock((pthread_mutex_t *)mutex) == 0 ? thrd_success : thrd_error;
}

void mtx_destroy(mtx_t *mutex) { pthread_mutex_destroy((pthread_mutex_t *)mutex); }

int cnd_init(cnd_t *condition) {
    return pthread_cond_init((pthread_cond_t *)condition, NULL) == 0 ? thrd_success : thrd_error;
}

int cnd_signal(cnd_t *condition) {
    return pthread_cond_signal((pthread_cond_t *)condition) == 0 ? thrd_success : thrd_error;
}

int cnd_broadcast(cnd_t *condition) {
    return pthread_cond_broadcast((pthread_cond_t *)condition) == 0 ? thrd_success : thrd_error;
}

int cnd_wait(cnd_t *condition, mtx_t *mutex) {
    return pthread_cond_wait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex) == 0 ? thrd_success : thrd_error;
}

int cnd_timedwait(cnd_t *restrict condition, mtx_t *restrict mutex, const struct timespec *restrict deadline) {
    int error = pthread_cond_timedwait((pthread_cond_t *)condition, (pthread_mutex_t *)mutex, deadline);
    return error == 0 ? thrd_success : error == ETIMEDOUT ? thrd_timedout : thrd_error;
}

void cnd_destroy(cnd_t *condition) { pthread_cond_destroy((pthread_cond_t *)condition); }

void call_once(once_flag *flag, void (*function)(void)) { pthread_once((pthread_once_t *)flag, function); }

// MARK: Swift's Synchronization.Mutex (the handle is passed by address as `self`)

#define SWIFT_LOCK_SLOW "$s15Synchronization12_MutexHandleV9_lockSlowyys6UInt32VF"
#define SWIFT_TRY_LOCK_SLOW "$s15Synchronization12_MutexHandleV12_tryLockSlowSbyF"
#define SWIFT_UNLOCK_SLOW "$s15Synchronization12_MutexHandleV11_unlockSlowyyF"

typedef __attribute__((swiftcall)) void (*LockSlow)(uint32_t, void *__attribute__((swift_context)));
typedef __attribute__((swiftcall)) bool (*TryLockSlow)(void *__attribute__((swift_context)));
typedef __attribute__((swiftcall)) void (*UnlockSlow)(void *__attribute__((swift_context)));

__attribute__((swiftcall)) void lock_slow(uint32_t owner, void *__attribute__((swift_context)) handle)
    __asm__(SWIFT_LOCK_SLOW);
__attribute__((swiftcall)) bool try_lock_slow(void *__attribute__((swift_context)) handle) __asm__(SWIFT_TRY_LOCK_SLOW);
__attribute__((swiftcall)) void unlock_slow(void *__attribute__((swift_context)) handle) __asm__(SWIFT_UNLOCK_SLOW);

__attribute__((swiftcall)) void lock_slow(uint32_t owner, void *__attribute__((swift_context)) handle) {
    static LockSlow next;
    if (next == NULL) next = (LockSlow)next_symbol(SWIFT_LOCK_SLOW);
    next(owner, handle);
    if (__tsan_acquire) __tsan_acquire(handle);
}

__attribute__((swiftcall)) bool try_lock_slow(void *__attribute__((swift_context)) handle) {
    static TryLockSlow next;
    if (next == NULL) next = (TryLockSlow)next_symbol(SWIFT_TRY_LOCK_SLOW);
    bool locked = next(handle);
    if (locked && __tsan_acquire) __tsan_acquire(handle);
    return locked;
}

__attribute__((swiftcall)) void unlock_slow(void *__attribute__((swift_context)) handle) {
    static UnlockSlow next;
    if (next == NULL) next = (UnlockSlow)next_symbol(SWIFT_UNLOCK_SLOW);
    if (__tsan_release) __tsan_release(handle);
    next(handle);
}
