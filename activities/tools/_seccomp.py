"""The seccomp filter every sandboxed command runs under: system calls that no limit sees, refused.

Resource limits cannot see some ways a command reaches past its sandbox: ``fallocate`` with
``FALLOC_FL_KEEP_SIZE`` reserves disk blocks past ``RLIMIT_FSIZE``, kernel keyrings are not
namespaced (their quota is the worker's user's), ``io_uring`` runs work the filter cannot check,
and a few calls (modules, kexec, mounts, ``bpf``) are attack surface a command never needs. This
module assembles a classic BPF program (``seccomp_program``) that ``bwrap --seccomp FD`` loads
before it runs the command: those calls fail with ``EPERM`` (``fallocate`` with ``EOPNOTSUPP``, so
that ``posix_fallocate`` falls back to writing, which the file-size limit bounds), every other call
runs. System calls of another ABI than the worker's (i386 or x32 on x86-64) are refused whole,
since their numbers differ. Source: seccomp(2), linux/filter.h, linux/audit.h, the kernel's
``unistd`` tables.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

__all__ = ["DENIED_SYSCALLS", "seccomp_fd", "seccomp_program"]

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# Offsets in struct seccomp_data: int nr; __u32 arch; ...
_NR_OFFSET = 0
_ARCH_OFFSET = 4
# x32 system calls on x86-64 carry this bit in their number.
_X32_SYSCALL_BIT = 0x40000000

# What is refused and why (the reason is for the threat model; the errno is what the caller sees).
DENIED_SYSCALLS: dict[str, str] = {
    "fallocate": "reserves disk past the file-size limit (FALLOC_FL_KEEP_SIZE); EOPNOTSUPP makes libc write instead",
    "add_key": "kernel keyrings are not namespaced: their quota and keys are the worker user's",
    "request_key": "kernel keyrings",
    "keyctl": "kernel keyrings",
    "io_uring_setup": "io_uring runs I/O the filter does not see",
    "io_uring_enter": "io_uring",
    "io_uring_register": "io_uring",
    "userfaultfd": "stalls kernel code paths at will (an exploit aid)",
    "perf_event_open": "kernel attack surface and side channels",
    "bpf": "kernel attack surface",
    "kexec_load": "replaces the kernel",
    "kexec_file_load": "replaces the kernel",
    "init_module": "loads kernel code",
    "finit_module": "loads kernel code",
    "delete_module": "unloads kernel code",
    "reboot": "the host's power",
    "swapon": "the host's swap",
    "swapoff": "the host's swap",
    "acct": "process accounting to a file",
    "quotactl": "disk quotas",
    "syslog": "the kernel log",
    "mount": "mounts over the sandbox's view",
    "umount2": "mounts",
    "pivot_root": "mounts",
    "open_tree": "mounts",
    "move_mount": "mounts",
    "fsopen": "mounts",
    "fsconfig": "mounts",
    "fsmount": "mounts",
    "fspick": "mounts",
    "mount_setattr": "mounts",
    "unshare": "new namespaces inside the sandbox",
    "setns": "other namespaces",
    "open_by_handle_at": "opens files by handle, past the mount view",
    "name_to_handle_at": "file handles",
    "lookup_dcookie": "kernel attack surface",
    "fanotify_init": "watches file systems",
}

# Numbers per ABI: linux/arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
_X86_64 = {
    "fallocate": 285, "add_key": 248, "request_key": 249, "keyctl": 250, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 323, "perf_event_open": 298, "bpf": 321,
    "kexec_load": 246, "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
    "reboot": 169, "swapon": 167, "swapoff": 168, "acct": 163, "quotactl": 179, "syslog": 103, "mount": 165,
    "umount2": 166, "pivot_root": 155, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "unshare": 272, "setns": 308,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "lookup_dcookie": 212, "fanotify_init": 300,
}
_AARCH64 = {
    "fallocate": 47, "add_key": 217, "request_key": 218, "keyctl": 219, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "userfaultfd": 282, "perf_event_open": 241, "bpf": 280,
    "kexec_load": 104, "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
    "reboot": 142, "swapon": 224, "swapoff": 225, "acct": 89, "quotactl": 60, "syslog": 116, "mount": 40,
    "umount2": 39, "pivot_root": 41, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "mount_setattr": 442, "unshare": 97, "setns": 268,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "lookup_dcookie": 18, "fanotify_init": 262,
}
# machine -> (AUDIT_ARCH_*, numbers, whether x32 numbers exist)
_ABIS = {
    "x86_64": (0xC000003E, _X86_64, True),
    "aarch64": (0xC00000B7, _AARCH64, False),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter for ``machine`` (default ``platform.machine()``) as ``bwrap --seccomp`` reads it:
    an array of ``struct sock_filter`` (8 bytes each, native byte order). None for a machine
    whose system call numbers are not known here (x86_64 and aarch64 are)."""
    abi = _ABIS.get(machine or platform.machine())
    if abi is None:
        return None
    arch, numbers, x32 = abi
    deny_all = _RET_ERRNO | errno.EPERM
    program = [
        _insn(_LD_W_ABS, 0, 0, _ARCH_OFFSET),
        _insn(_JEQ_K, 1, 0, arch),
        _insn(_RET_K, 0, 0, deny_all),  # another ABI: other numbers, refused whole
        _insn(_LD_W_ABS, 0, 0, _NR_OFFSET),
    ]
    if x32:
        program += [_insn(_JGE_K, 0, 1, _X32_SYSCALL_BIT), _insn(_RET_K, 0, 0, deny_all)]
    for name in DENIED_SYSCALLS:
        code = errno.EOPNOTSUPP if name == "fallocate" else errno.EPERM
        program += [_insn(_JEQ_K, 0, 1, numbers[name]), _insn(_RET_K, 0, 0, _RET_ERRNO | code)]
    program.append(_insn(_RET_K, 0, 0, _RET_ALLOW))
    return b"".join(program)


def seccomp_fd(program: bytes) -> int:
    """A readable fd holding ``program`` from its start (a pipe, written and closed at the far end),
    to pass to ``bwrap --seccomp FD``, which reads it to its end. The caller closes it once
    ``bwrap`` has started. Raises ``OSError`` when no pipe can be made."""
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below a pipe's buffer
    except OSError:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
