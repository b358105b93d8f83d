/*
 * The runner's seccomp filter, shared by the native guard (nodlopen.c, installed at the runner's start)
 * and the fork server (forkserver.c, installed again in every runner it forks, with that runner's pid:
 * filters stack, so a forked runner can signal no process at all, not even the fork server it came from).
 *
 * Refuses signals to any process but `self` (kill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo), and
 * tkill, pidfd_open, pidfd_send_signal, ptrace and process_vm_readv/writev outright.
 */
#ifndef WPBENCH_SIGNAL_FILTER_H
#define WPBENCH_SIGNAL_FILTER_H

#include <errno.h>
#include <stddef.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define GUARD_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define GUARD_ARCH AUDIT_ARCH_AARCH64
#endif

#define NR_JUMP(nr, to) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), (to), 0)
#define ARG0_LOW (offsetof(struct seccomp_data, args[0]))

static int deny_foreign_signals(unsigned int self)
{
#ifdef GUARD_ARCH
    struct sock_filter filter[] = {
        /* 0 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        /* 1 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GUARD_ARCH, 1, 0),
        /* 2 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        /* 3 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        /* 4 */ BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 13, 0), /* x32 numbers: deny */
        /* 5 */ NR_JUMP(__NR_kill, 9),
        /* 6 */ NR_JUMP(__NR_tgkill, 8),
        /* 7 */ NR_JUMP(__NR_rt_sigqueueinfo, 7),
        /* 8 */ NR_JUMP(__NR_rt_tgsigqueueinfo, 6),
        /* 9 */ NR_JUMP(__NR_tkill, 8),
        /* 10 */ NR_JUMP(__NR_ptrace, 7),
        /* 11 */ NR_JUMP(__NR_process_vm_readv, 6),
        /* 12 */ NR_JUMP(__NR_process_vm_writev, 5),
        /* 13 */ NR_JUMP(434 /* pidfd_open */, 4),
        /* 14 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 424 /* pidfd_send_signal */, 3, 2),
        /* 15: a signal call: allowed only when its first argument is this process */
        /* 15 */ BPF_STMT(BPF_LD | BPF_W | BPF_ABS, ARG0_LOW),
        /* 16 */ BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, self, 0, 1),
        /* 17 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        /* 18 */ BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
    };
    struct sock_fprog prog;
    prog.len = (unsigned short) (sizeof filter / sizeof filter[0]);
    prog.filter = filter;
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
        return -1;
    }
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0);
#else
    return -1;
#endif
}

#endif
