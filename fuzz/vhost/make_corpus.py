#!/usr/bin/env python3
"""Write the seed inputs of fuzz_vhost_msg into fuzz/corpus/vhost_msg/.

Chunk format: [fd byte: low 4 bits = fd count, bit 6 = eventfd, bit 7 = memfd][request u32][flags u32]
[size u32][payload].  Native (little-endian x86) byte order, as vhost-user is."""
import os
import struct

MEM = 0x80  # fds are dups of the fuzzer's 1 MiB memfd
EVT = 0x40  # fds are fresh eventfds
UVA = 0x7f0000000000


def msg(req, payload=b"", nfds=0, flags=1):
    return bytes([nfds]) + struct.pack("<III", req, flags, len(payload)) + payload


def u64(v):
    return struct.pack("<Q", v)


def state(i, n):
    return struct.pack("<II", i, n)


def region(gpa, size, uva, off):
    return struct.pack("<QQQQ", gpa, size, uva, off)


def addr(i, base):
    return struct.pack("<IIQQQQ", i, 0, base, base + 0x2000, base + 0x1000, 0)


def ring(i):
    base = UVA + 0xc0000 + i * 0x4000
    return (msg(8, state(i, 128)) + msg(10, state(i, 0)) + msg(9, addr(i, base)) +
            msg(12, u64(i | 0x100)) + msg(13, u64(i | 0x100)) + msg(18, state(i, 1)))


mem2 = struct.pack("<II", 2, 0) + region(0, 0xa0000, UVA, 0) + \
    region(0xc0000, 0x40000, UVA + 0xc0000, 0xc0000)
qemu = (msg(1) + msg(15) + msg(16, u64(0x8009)) + msg(17) + msg(3) +
        msg(2, u64((1 << 32) | (1 << 30) | (1 << 29))) +
        bytes([2 | MEM]) + struct.pack("<III", 5, 9, len(mem2)) + mem2 +
        ring(0) + ring(1) + ring(2) + msg(11, state(1, 0)) +
        msg(18, state(0, 0)) + msg(11, state(0, 0)))
slots = (msg(16, u64(0x8009)) + msg(2, u64(1 << 32)) + msg(36) +
         msg(37, u64(0) + region(0, 0xa0000, UVA, 0), 1 | MEM) +
         msg(37, u64(0) + region(0xc0000, 0x40000, UVA + 0xc0000, 0xc0000), 1 | MEM) +
         ring(0) + msg(38, u64(0) + region(0, 0xa0000, UVA, 0)) +
         msg(38, u64(0) + region(0xc0000, 0x40000, UVA + 0xc0000, 0xc0000)))
# Dirty logging: LOG_SHMFD acked, a log in the memfd's last page (256 pages of guest memory:
# 32 bytes), LOG_ALL, the rings' addresses with VHOST_VRING_F_LOG (their used rings' guest
# addresses), one beyond the log; the log replaced at another offset while logging.
def log_addr(i, base, log_gpa):
    return struct.pack("<IIQQQQ", i, 1, base, base + 0x2000, base + 0x1000, log_gpa)


def log_base(size, off):
    return bytes([1 | MEM]) + struct.pack("<III", 6, 1, 16) + struct.pack("<QQ", size, off)


logging = (msg(1) + msg(15) + msg(16, u64(0x800b)) + msg(17) + msg(3) +
           msg(2, u64((1 << 32) | (1 << 30) | (1 << 29))) +
           bytes([2 | MEM]) + struct.pack("<III", 5, 1, len(mem2)) + mem2 +
           ring(0) + ring(1) + log_base(32, 0xff000) +
           msg(2, u64((1 << 32) | (1 << 30) | (1 << 29) | (1 << 26))) +
           msg(9, log_addr(0, UVA + 0xc0000, 0xc2000)) +
           msg(9, log_addr(1, UVA + 0xc4000, 1 << 40)) +
           log_base(64, 0xfe000) + msg(2, u64((1 << 32) | (1 << 30) | (1 << 29))))
seeds = {
    "logging": logging,
    "qemu_sequence": qemu,
    "mem_slots": slots,
    "get_features": msg(1),
    "bad_size_need_reply": msg(2, b"abcd", flags=9),
    "set_config": msg(25, struct.pack("<III", 0, 4, 0) + b"\0" * 4, flags=9),
    "kick_with_fd": msg(12, u64(0), 1),
    "kick_with_eventfd": qemu[:-len(msg(11, state(0, 0)))] + msg(12, u64(0), 1 | EVT) +
    msg(13, u64(0), 1 | EVT),
}
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "vhost_msg")
os.makedirs(here, exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(data)
