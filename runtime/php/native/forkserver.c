/*
 * wpbench_forkserver.so: fast mode's shared WordPress boot. A PHP extension loaded into every runner (so a
 * candidate sees the same functions in both modes); it does something only in a runner the supervisor
 * started as a fork server, which it knows from the descriptors it was started with, before any PHP runs.
 *
 * A fork server is a runner (the same command line, environment, guard, seccomp filter, open_basedir)
 * started with fd 3 — where a runner has its event channel — set to a SOCK_SEQPACKET unix socket whose
 * other end belongs to its parent. It boots WordPress from the laid-out baseline, closes its database
 * connection, and calls wpbench_fork_runner(), which never returns in it: for each byte the supervisor
 * sends it forks one runner, which gets fresh pipes as its fds 0-3 (so the control socket is gone from it),
 * a second copy of the seccomp filter with its own pid (filters stack: it can signal no process at all),
 * and returns true into PHP, where the runner goes on exactly as a freshly started one after its boot.
 * The server sends the supervisor the pipes' other ends and the runner's pid, then its wait status.
 *
 * What it refuses to fork from (exit 71, said on stderr): a descriptor above 3 that is not a read-only
 * file under /opt or /usr (the database connection must be closed: its file, WAL and shared-memory index
 * would be shared by every runner), any writable shared mapping (the same), a dumpable process. Those are
 * checked once, before the first fork: the server runs no PHP after that.
 *
 * PHP sees two functions. wpbench_fork_server(): bool says whether this process is a fork server that has
 * not served yet. wpbench_fork_runner(): bool returns false at once in every process but such a server, so
 * in every forked runner (the flag is inherited) and every runner started afresh.
 */
#define _GNU_SOURCE /* struct ucred */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#include "php.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "signal_filter.h"

#define CONTROL_FD 3
#define FORKED 1
#define EXITED 2
#define FAILED 3

/* One message to the supervisor: what happened, the pid or wait status or errno, the runner's CPU. */
struct record {
	int32_t kind;
	int32_t value;
	int64_t cpu_us;
};

static int is_server = 0; /* fixed in MINIT, from the descriptors this process was started with */
static int used = 0;
static int forked = 0;    /* this process is a forked runner */

static void say(const char *what)
{
	ssize_t ignored = write(2, "wpbench_forkserver: ", 20);
	ignored = write(2, what, strlen(what));
	ignored = write(2, "\n", 1);
	(void) ignored;
}

static int started_as_server(void)
{
	struct stat st;
	struct ucred peer;
	int type = 0;
	socklen_t len = sizeof type;
	socklen_t peer_len = sizeof peer;
	if (fstat(CONTROL_FD, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		return 0;
	}
	if (getsockopt(CONTROL_FD, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_SEQPACKET) {
		return 0;
	}
	if (getsockopt(CONTROL_FD, SOL_SOCKET, SO_PEERCRED, &peer, &peer_len) != 0) {
		return 0;
	}
	return peer.pid == getppid();
}

/* Descriptors above CONTROL_FD: only read-only files of the image (the script PHP keeps open). */
static int descriptors_clean(void)
{
	DIR *dir = opendir("/proc/self/fd");
	struct dirent *entry;
	int clean = 1;
	if (dir == NULL) {
		return 0;
	}
	while (clean && (entry = readdir(dir)) != NULL) {
		char link[64], target[4096];
		int fd = atoi(entry->d_name);
		ssize_t n;
		if (entry->d_name[0] == '.' || fd <= CONTROL_FD || fd == dirfd(dir)) {
			continue;
		}
		snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof target - 1);
		target[n > 0 ? n : 0] = '\0';
		clean = n > 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY
			&& (strncmp(target, "/opt/", 5) == 0 || strncmp(target, "/usr/", 5) == 0);
		if (!clean) {
			say("an open descriptor would be shared with every runner:");
			say(target);
		}
	}
	closedir(dir);
	return clean;
}

/* No writable shared mapping (perms "rw?s" in /proc/self/maps). */
static int mappings_private(void)
{
	char line[4096];
	int ok = 1;
	FILE *maps = fopen("/proc/self/maps", "re");
	if (maps == NULL) {
		return 0;
	}
	while (ok && fgets(line, sizeof line, maps) != NULL) {
		char *perms = strchr(line, ' ');
		ok = perms == NULL || strlen(perms) < 5 || !(perms[2] == 'w' && perms[4] == 's');
		if (!ok) {
			say("a writable shared mapping would be shared with every runner:");
			say(line);
		}
	}
	fclose(maps);
	return ok;
}

static void send_record(int kind, int value, int64_t cpu_us, const int *fds, int nfds)
{
	struct record rec = { kind, value, cpu_us };
	struct iovec iov = { &rec, sizeof rec };
	union { char buf[CMSG_SPACE(4 * sizeof(int))]; struct cmsghdr align; } control;
	struct msghdr msg;
	memset(&msg, 0, sizeof msg);
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	if (nfds > 0) {
		struct cmsghdr *cmsg;
		memset(&control, 0, sizeof control);
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		cmsg = CMSG_FIRSTHDR(&msg);
		cmsg->cmsg_level = SOL_SOCKET;
		cmsg->cmsg_type = SCM_RIGHTS;
		cmsg->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(cmsg), fds, nfds * sizeof(int));
	}
	while (sendmsg(CONTROL_FD, &msg, MSG_NOSIGNAL) < 0) {
		if (errno != EINTR) {
			_exit(0); /* the supervisor is gone */
		}
	}
}

/* In the forked runner: the pipes become fds 0-3 (closing the control socket), the filter again. */
static int become_runner(int pipes[4][2])
{
	/* stdin is read by the runner; stdout, stderr and the event channel are written */
	int ends[4] = { pipes[0][0], pipes[1][1], pipes[2][1], pipes[3][1] };
	int i;
	for (i = 0; i < 4; i++) {
		if (dup2(ends[i], i) != i) {
			return 0;
		}
	}
	for (i = 0; i < 4; i++) {
		close(pipes[i][0]);
		close(pipes[i][1]);
	}
	return deny_foreign_signals((unsigned int) getpid()) == 0 && prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0;
}

static void serve(void)
{
	for (;;) {
		char request;
		int pipes[4][2], theirs[4], i, status = 0, made = 0;
		struct rusage usage;
		pid_t pid;
		ssize_t n = recv(CONTROL_FD, &request, 1, 0);
		if (n == 0) {
			_exit(0); /* the supervisor closed the socket: the sequence is over */
		}
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			_exit(71);
		}
		for (made = 0; made < 4 && pipe2(pipes[made], O_CLOEXEC) == 0; made++) {
		}
		pid = made == 4 ? fork() : -1;
		if (pid == 0) {
			if (!become_runner(pipes)) {
				say("a forked runner could not take its descriptors or its seccomp filter");
				_exit(71);
			}
			forked = 1;
			return;
		}
		if (pid < 0) {
			int error = errno;
			for (i = 0; i < made; i++) {
				close(pipes[i][0]);
				close(pipes[i][1]);
			}
			send_record(FAILED, error, 0, NULL, 0);
			continue;
		}
		theirs[0] = pipes[0][1];
		theirs[1] = pipes[1][0];
		theirs[2] = pipes[2][0];
		theirs[3] = pipes[3][0];
		close(pipes[0][0]);
		close(pipes[1][1]);
		close(pipes[2][1]);
		close(pipes[3][1]);
		send_record(FORKED, (int) pid, 0, theirs, 4);
		for (i = 0; i < 4; i++) {
			close(theirs[i]);
		}
		while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
		}
		send_record(EXITED, status,
			(int64_t) (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000000
				+ usage.ru_utime.tv_usec + usage.ru_stime.tv_usec,
			NULL, 0);
	}
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_wpbench_fork_runner, 0, 0, _IS_BOOL, 0)
ZEND_END_ARG_INFO()

PHP_FUNCTION(wpbench_fork_runner)
{
	ZEND_PARSE_PARAMETERS_NONE();
	if (!is_server || used) {
		RETURN_FALSE;
	}
	used = 1;
	if (!descriptors_clean() || !mappings_private() || prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) != 0) {
		_exit(71);
	}
	fflush(NULL);
	serve(); /* returns only in a forked runner */
	RETURN_TRUE;
}

PHP_FUNCTION(wpbench_fork_server)
{
	ZEND_PARSE_PARAMETERS_NONE();
	RETURN_BOOL(is_server && !used);
}

static const zend_function_entry functions[] = {
	ZEND_FE(wpbench_fork_runner, arginfo_wpbench_fork_runner)
	ZEND_FE(wpbench_fork_server, arginfo_wpbench_fork_runner)
	ZEND_FE_END
};

static PHP_MINIT_FUNCTION(wpbench_forkserver)
{
	is_server = started_as_server();
	return SUCCESS;
}

/*
 * A forked runner ends here, with the exit status PHP would end with: everything it can be observed doing
 * at the end is done before the extensions' RSHUTDOWN (shutdown functions, destructors, output flushed;
 * this extension is the last loaded, so the first to shut down). What is skipped is freeing memory it
 * shares copy-on-write with the fork server, which would copy those pages only to drop them.
 */
static PHP_RSHUTDOWN_FUNCTION(wpbench_forkserver)
{
	if (forked) {
		fflush(NULL);
		_exit(EG(exit_status));
	}
	return SUCCESS;
}

zend_module_entry wpbench_forkserver_module_entry = {
	STANDARD_MODULE_HEADER,
	"wpbench_forkserver",
	functions,
	PHP_MINIT(wpbench_forkserver),
	NULL,
	NULL,
	PHP_RSHUTDOWN(wpbench_forkserver),
	NULL,
	"1.0",
	STANDARD_MODULE_PROPERTIES
};

ZEND_GET_MODULE(wpbench_forkserver)
