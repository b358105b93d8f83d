/*
 * nodlopen.so: preloaded into the grader's runner process (LD_PRELOAD, set by the supervisor).
 *
 * Refuses dlopen()/dlmopen() of any file outside the system library directories, so candidate
 * PHP cannot get native code it wrote to a writable mount into the process, whatever the PHP
 * route: Pdo\Sqlite::loadExtension() (no open_basedir check in PHP 8.4), OpenSSL's dynamic
 * engines (CURLOPT_SSLENGINE with a path), or anything else that ends in dlopen(). PHP loading
 * its own extensions from /usr/lib/php is unaffected. Built with tcc in the Dockerfile.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
