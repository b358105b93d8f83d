/*
 * nodlopen.so: the grader's native guard, preloaded into every process of the grader container
 * (LD_PRELOAD in the image's environment; the supervisor sets it again for the runner).
 *
 * In every process (a constructor): PR_SET_DUMPABLE 0. Runner and supervisor share a uid, and a
 * dumpable supervisor's /proc/1/fd/1 (the verdict) would open for the runner; a non-dumpable
 * process's /proc entries belong to root and need CAP_SYS_PTRACE, which the grader never has.
 *
 * In the runner (WPBENCH_GUARD_ROLE=runner): RLIMIT_DATA from WPBENCH_DATA_LIMIT (memory_limit can be
 * raised from PHP; this cannot), and a seccomp filter that refuses signals to any process but itself
 * (kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo; tkill, pidfd_open, pidfd_send_signal, ptrace and
 * process_vm_readv/writev outright). So a signal that reaches the supervisor comes from outside the
 * container. The runner checks /proc/self/status for the filter before anything untrusted runs.
 *
 * And it refuses dlopen()/dlmopen() of any file outside the system library directories, so candidate
 * PHP cannot get native code it wrote to a writable mount into the process, whatever the PHP
 * route: Pdo\Sqlite::loadExtension() (no open_basedir check in PHP 8.4), OpenSSL's dynamic
 * engines (CURLOPT_SSLENGINE with a path), or anything else that ends in dlopen(). PHP loading
 * its own extensions from /usr/lib/php is unaffected. Built with tcc in the Dockerfile.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "signal_filter.h"

/* The runner looks for this symbol's library in /proc/self/maps to know the guard is in place. */
const char wpbench_nodlopen_guard[] = "wpbench-nodlopen";

/* A path the loader is asked for instead of a refused one: it fails with a proper dlerror(). */
static const char REFUSED[] = "/wpbench-refused-to-load-native-code";

static int allowed(const char *file)
{
    char resolved[PATH_MAX];
    if (file == NULL || strchr(file, '/') == NULL) {
        return 1; /* the program itself, or a bare name the loader finds in system paths */
    }
    if (realpath(file, resolved) == NULL) {
        return 1; /* nothing there: the loader fails with its own error (PHP probes names so) */
    }
    return strncmp(resolved, "/usr/lib/", 9) == 0 || strncmp(resolved, "/lib/", 5) == 0;
}

static void refuse(const char *file)
{
    static const char msg[] = "wpbench: refused to load native code from ";
    ssize_t ignored;
    ignored = write(2, msg, sizeof msg - 1);
    ignored = write(2, file, strlen(file));
    ignored = write(2, "\n", 1);
    (void) ignored;
}

void *dlopen(const char *file, int mode)
{
    static void *(*real)(const char *, int);
    if (real == NULL) {
        real = (void *(*)(const char *, int)) dlsym(RTLD_NEXT, "dlopen");
    }
    if (!allowed(file)) {
        refuse(file);
        return real(REFUSED, mode);
    }
    return real(file, mode);
}

void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
    static void *(*real)(Lmid_t, const char *, int);
    if (real == NULL) {
        real = (void *(*)(Lmid_t, const char *, int)) dlsym(RTLD_NEXT, "dlmopen");
    }
    if (!allowed(file)) {
        refuse(file);
        return real(lmid, REFUSED, mode);
    }
    return real(lmid, file, mode);
}

__attribute__((constructor)) static void wpbench_guard_init(void)
{
    const char *role = getenv("WPBENCH_GUARD_ROLE");
    const char *limit = getenv("WPBENCH_DATA_LIMIT");
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    if (role == NULL || strcmp(role, "runner") != 0) {
        return;
    }
    if (limit != NULL && *limit != '\0') {
        struct rlimit data;
        data.rlim_cur = data.rlim_max = (rlim_t) strtoull(limit, NULL, 10);
        setrlimit(RLIMIT_DATA, &data);
    }
    if (deny_foreign_signals((unsigned int) getpid()) != 0) {
        static const char msg[] = "wpbench: could not install the seccomp filter\n";
        ssize_t ignored = write(2, msg, sizeof msg - 1);
        (void) ignored;
    }
}
