/* tmpfiles.c -- temporary files and build folders that must not outlive the compiler, even
 * when it is killed by a signal (util.h). The signal handler uses only async-signal-safe calls
 * (open, getdents64, unlinkat, close, kill, waitpid, sigaction, raise): the registry is a fixed
 * table of fixed-size paths, and folders are walked with raw getdents64 into stack buffers. */
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* A slot is FREE, CLAIMED (a thread is writing its path) or LIVE (the handler may remove it).
 * Threads claim slots with a compare-and-swap; the handler reads only LIVE ones. Lock-free
 * atomics are async-signal-safe. */
enum { FREE = 0, CLAIMED = 1, LIVE = 2 };
static struct {
    atomic_int state;
    char path[PATH_MAX];
} slots[CUVIL_TMP_MAX];
/* the C compilers the compiler waits for (several at once: the parts of a model) */
static atomic_long child_pids[CUVIL_CHILD_MAX];

bool cuvil_tmp_register(const char *path) {
    size_t n = strlen(path);
    if (n >= PATH_MAX) return false;
    for (int i = 0; i < CUVIL_TMP_MAX; i++) {
        int expect = FREE;
        if (!atomic_compare_exchange_strong(&slots[i].state, &expect, CLAIMED)) continue;
        memcpy(slots[i].path, path, n + 1);
        atomic_store(&slots[i].state, LIVE);   /* only now can the handler see it */
        return true;
    }
    return false;
}

void cuvil_tmp_forget(const char *path) {
    for (int i = 0; i < CUVIL_TMP_MAX; i++) {
        if (atomic_load(&slots[i].state) != LIVE || strcmp(slots[i].path, path)) continue;
        int expect = LIVE;
        atomic_compare_exchange_strong(&slots[i].state, &expect, FREE);
    }
}

bool cuvil_tmp_add_child(long pid) {
    for (int i = 0; i < CUVIL_CHILD_MAX; i++) {
        long expect = 0;
        if (atomic_compare_exchange_strong(&child_pids[i], &expect, pid)) return true;
    }
    return false;
}

void cuvil_tmp_drop_child(long pid) {
    for (int i = 0; i < CUVIL_CHILD_MAX; i++) {
        long expect = pid;
        if (atomic_compare_exchange_strong(&child_pids[i], &expect, 0)) return;
    }
}

struct dirent64_raw {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Removes the entry `name` of the folder dirfd, recursing into folders (depth-bounded: our
 * own build trees are a few levels deep). Returns true when it is gone. Async-signal-safe. */
static bool remove_at(int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return true;
    if (depth > 16) return false;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[4096];
    /* read a batch, remove it, read again from the start until nothing is left (or nothing
     * more can be removed) */
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (n <= 0) break;
        bool progress = false;
        for (long off = 0; off < n;) {
            struct dirent64_raw *e = (void *)(buf + off);
            off += e->d_reclen;
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            progress |= remove_at(fd, e->d_name, depth + 1);
        }
        if (!progress || lseek(fd, 0, SEEK_SET) != 0) break;
    }
    close(fd);
    return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT;
}

void cuvil_tmp_remove(const char *path) {
    remove_at(AT_FDCWD, path, 0);   /* first: a signal meanwhile still finds it registered */
    cuvil_tmp_forget(path);
}

static atomic_int handlers_installed;

bool cuvil_tmp_own_group(void) { return atomic_load(&handlers_installed) != 0; }

static void on_signal(int sig) {
    int saved = errno;
    for (int i = 0; i < CUVIL_CHILD_MAX; i++) {
        pid_t pid = (pid_t)atomic_load(&child_pids[i]);
        if (pid > 0) {
            /* each C compiler runs in its own process group (cc1 and as included): stop all of it */
            kill(-pid, SIGTERM);
            kill(pid, SIGTERM);
        }
    }
    for (int i = 0; i < CUVIL_CHILD_MAX; i++) {
        pid_t pid = (pid_t)atomic_load(&child_pids[i]);
        if (pid > 0)
            while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    }
    for (int i = 0; i < CUVIL_TMP_MAX; i++)
        if (atomic_load(&slots[i].state) == LIVE) remove_at(AT_FDCWD, slots[i].path, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    errno = saved;
    raise(sig);   /* delivered when the handler returns: the default action, exit status included */
}

/* Every catchable signal whose default action ends the process, but those that mean a crash of
 * this process (SIGSEGV, SIGBUS, SIGILL, SIGFPE: state may be corrupt, and a sanitizer's report
 * matters more) and SIGKILL, which cannot be caught: termination requests, SIGPIPE, timers,
 * resource limits, SIGABRT (an internal check failing), SIGTRAP, SIGSYS and the real-time
 * signals. */
void cuvil_install_signal_cleanup(void) {
    static const int fixed[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGALRM, SIGUSR1, SIGUSR2, SIGXCPU,
                                SIGVTALRM, SIGPROF, SIGPOLL, SIGPWR, SIGSTKFLT, SIGABRT, SIGTRAP, SIGSYS};
    int sigs[sizeof fixed / sizeof fixed[0] + 64], n = 0;
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) sigs[n++] = fixed[i];
    for (int s = SIGRTMIN; s <= SIGRTMAX && n < (int)(sizeof sigs / sizeof sigs[0]); s++) sigs[n++] = s;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < n; i++) sigaddset(&sa.sa_mask, sigs[i]);
    for (int i = 0; i < n; i++) {
        struct sigaction old;
        /* a signal the parent set to be ignored (nohup) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(sigs[i], &sa, NULL);
    }
    signal(SIGXFSZ, SIG_IGN);
    atomic_store(&handlers_installed, 1);
}
