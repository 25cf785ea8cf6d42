/* An AVX2-only CPU on an AVX-512 one, for benchmarks: LD_PRELOAD this into a process and its CPUID
 * instructions report no AVX-512 (F, DQ, IFMA, CD, BW, VL, VBMI, VBMI2, VNNI, BITALG, VPOPCNTDQ,
 * FP16, BF16), no AVX-VNNI and no AMX, as on AMD's Zen 2/3. Every library in the process (ONNX
 * Runtime's MLAS, a compiled Cuvil model's CPU check) then picks the kernels it would pick on
 * such a CPU; the instructions still run at this CPU's speed. Needs the kernel's CPUID faulting
 * (the cpuid_fault flag in /proc/cpuinfo): CPUID traps, and this handler answers it.
 *
 *     cc -O2 -shared -fPIC -o cpuid_mask.so bench/cpuid_mask.c
 *     LD_PRELOAD=$PWD/cpuid_mask.so python3 ...
 *
 * A benchmark aid, not part of Cuvil: the process must not install its own SIGSEGV handler. */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

static void mask_leaf(unsigned leaf, unsigned sub, unsigned *a, unsigned *b, unsigned *c, unsigned *d)
{
    if (leaf == 7 && sub == 0) {
        *b &= ~((1u << 16) | (1u << 17) | (1u << 21) | (1u << 26) | (1u << 27) | (1u << 28) | (1u << 30) | (1u << 31));
        *c &= ~((1u << 1) | (1u << 6) | (1u << 11) | (1u << 12) | (1u << 14));
        *d &= ~((1u << 2) | (1u << 3) | (1u << 8) | (1u << 22) | (1u << 23) | (1u << 24) | (1u << 25));
    } else if (leaf == 7 && sub == 1) {
        *a &= ~((1u << 4) | (1u << 5) | (1u << 23));   /* AVX-VNNI, AVX512_BF16, AVX-IFMA */
    }
}

static void on_segv(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    greg_t *r = uc->uc_mcontext.gregs;
    const unsigned char *ip = (const unsigned char *)r[REG_RIP];
    (void)si;
    if (ip[0] != 0x0f || ip[1] != 0xa2) {   /* a real fault: die as it would have */
        signal(sig, SIG_DFL);
        return;
    }
    unsigned leaf = (unsigned)r[REG_RAX], sub = (unsigned)r[REG_RCX], a, b, c, d;
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
    __cpuid_count(leaf, sub, a, b, c, d);
    syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
    mask_leaf(leaf, sub, &a, &b, &c, &d);
    r[REG_RAX] = a;
    r[REG_RBX] = b;
    r[REG_RCX] = c;
    r[REG_RDX] = d;
    r[REG_RIP] += 2;
}

__attribute__((constructor)) static void cpuid_mask_init(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        perror("cpuid_mask: arch_prctl(ARCH_SET_CPUID, 0) (no CPUID faulting here)");
        exit(2);
    }
}
