#!/usr/bin/env python3
"""Write the seed inputs of fuzz_target_session into fuzz/corpus/target_session/.

An input: [u16 n][n bytes of guest memory] then operations (fuzz_target_session.c):
a vhost-user message (op 0x00, then [fd byte][request u32][flags u32][size u32][payload];
fd byte: low 4 bits = fd count, bit 6 = eventfds, bit 7 = dups of the guest memfd),
a kick (0x40 | queue), a guest memory write (0x80, u16 offset, u8 len, bytes), a shrink
of the guest memory file (0xc0 | 4 KiB units), passes (0xe0).

Guest memory (256 KiB, one region at guest address 0, user address UVA):
  0x000 + q * 0x200   ring q, 16 entries: descriptors, avail at +0x100, used at +0x140
  0x800 + s * 0x100   slot s: request header at +0, response at +0x40
  0x1000 + s * 0x200  slot s's data (512 bytes)
"""
import os
import struct

UVA = 0x7f0000000000
MEM = 256 << 10
QSIZE = 16
NEXT, WRITE = 1, 2
EVT, MEMFD = 0x40, 0x80


def msg(req, payload=b"", nfds=0, flags=1):
    return b"\x00" + bytes([nfds]) + struct.pack("<III", req, flags, len(payload)) + payload


def u64(v):
    return struct.pack("<Q", v)


def state(i, n):
    return struct.pack("<II", i, n)


def ring_base(q):
    return q * 0x200


def slot(s):
    return 0x800 + s * 0x100


def data(s):
    return 0x1000 + s * 0x200


def mem_table(size=MEM, offset=0):
    return msg(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, size, UVA, offset),
               1 | MEMFD)


def ring_setup(q):
    base = ring_base(q)
    addr = struct.pack("<IIQQQQ", q, 0, UVA + base, UVA + base + 0x140, UVA + base + 0x100, 0)
    return (msg(8, state(q, QSIZE)) + msg(10, state(q, 0)) + msg(9, addr) +
            msg(13, u64(q), 1 | EVT) + msg(12, u64(q), 1 | EVT) + msg(18, state(q, 1)))


SETUP = (msg(1) + msg(15) + msg(16, u64(0x9)) + msg(17) + msg(3) +
         msg(2, u64((1 << 32) | (1 << 28) | (1 << 29) | (1 << 30))) + mem_table() +
         b"".join(ring_setup(q) for q in range(4)))


class Guest:
    """Guest memory with chains made available on the rings."""

    def __init__(self):
        self.mem = bytearray(0x2000)
        self.next_desc = [0] * 4
        self.avail = [0] * 4

    def put(self, at, b):
        self.mem[at:at + len(b)] = b

    def chain(self, q, bufs):
        """bufs: (guest address, length, writable); appended to ring q."""
        base = ring_base(q)
        head = self.next_desc[q]
        for i, (addr, length, wr) in enumerate(bufs):
            d = self.next_desc[q]
            flags = (WRITE if wr else 0) | (NEXT if i + 1 < len(bufs) else 0)
            self.put(base + 16 * d, struct.pack("<QIHH", addr, length, flags, d + 1))
            self.next_desc[q] += 1
        a = self.avail[q]
        self.put(base + 0x100 + 4 + 2 * a, struct.pack("<H", head))
        self.avail[q] += 1
        self.put(base + 0x100 + 2, struct.pack("<H", self.avail[q]))

    def scsi(self, q, s, cdb, out=b"", in_len=0, lun=0, tag=0):
        hdr = bytes([1, 0, 0x40, lun, 0, 0, 0, 0]) + struct.pack("<QBBB", tag, 0, 0, 0)
        self.put(slot(s), hdr + cdb.ljust(32, b"\0"))
        bufs = [(slot(s), 51, False)]
        if out:
            self.put(data(s), out)
            bufs.append((data(s), len(out), False))
        bufs.append((slot(s) + 0x40, 108, True))
        if in_len:
            bufs.append((data(s), in_len, True))
        self.chain(q, bufs)

    def tmf(self, s, subtype, tag, lun=0):
        req = struct.pack("<II", 0, subtype) + bytes([1, 0, 0x40, lun, 0, 0, 0, 0]) + \
            struct.pack("<Q", tag)
        self.put(slot(s), req)
        self.chain(0, [(slot(s), len(req), False), (slot(s) + 0x40, 1, True)])

    def an(self, s):
        req = struct.pack("<I", 1) + bytes([1, 0, 0x40, 0, 0, 0, 0, 0]) + struct.pack("<I", 0x7e)
        self.put(slot(s), req)
        self.chain(0, [(slot(s), len(req), False), (slot(s) + 0x40, 5, True)])

    def image(self):
        return struct.pack("<H", len(self.mem)) + bytes(self.mem)


def kick(q):
    return bytes([0x40 | q])


PUMP = b"\xe0"


def rw10(op, lba, n):
    return bytes([op, 0]) + struct.pack(">I", lba) + b"\0" + struct.pack(">H", n) + b"\0"


def io():
    g = Guest()
    g.scsi(2, 0, rw10(0x2a, 8, 1), out=b"\x5a" * 512)
    g.scsi(2, 1, rw10(0x28, 8, 1), in_len=512)
    g.scsi(3, 2, bytes([0x12, 0, 0, 0, 96, 0]), in_len=96)
    g.scsi(3, 3, bytes([0x00] * 6), lun=1)
    g.scsi(2, 4, bytes([0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 64, 0, 0]), in_len=64)
    return g.image() + SETUP + kick(2) + kick(3) + PUMP


def tmf():
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 0, 8), in_len=512, tag=7)
    g.tmf(6, 0, 7)   # ABORT TASK
    g.tmf(5, 5, 0)   # LOGICAL UNIT RESET
    g.an(7)
    return g.image() + SETUP + kick(2) + kick(0) + PUMP + kick(2)


def remap():
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 1, 1), in_len=512)
    return g.image() + SETUP + kick(2) + mem_table(MEM // 2) + kick(2) + mem_table() + PUMP


def shrink():
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 1, 1), in_len=512)
    return g.image() + SETUP + b"\xc0" + kick(2) + PUMP + SETUP + kick(2)


def restart():
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 1, 1), in_len=512)
    g.scsi(2, 1, rw10(0x2a, 1, 1), out=b"\x11" * 512)
    return (g.image() + SETUP + kick(2) + msg(11, state(2, 0)) + msg(10, state(2, 1)) +
            msg(12, u64(2), 1 | EVT) + kick(2) + msg(34) + SETUP + kick(2))


def bad_chains():
    g = Guest()
    g.chain(2, [(0xdead0000, 51, False), (slot(0) + 0x40, 108, True)])
    g.chain(2, [(slot(1) + 0x40, 108, True), (slot(1), 51, False)])
    g.chain(3, [(slot(2), 20, False), (slot(2) + 0x40, 108, True)])
    return g.image() + SETUP + kick(2) + kick(3) + PUMP


def poke():
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 1, 1), in_len=512)
    rewrite = b"\x80" + struct.pack("<HB", slot(0) + 19, 10) + rw10(0x2a, 2, 1)
    return g.image() + SETUP + rewrite + kick(2) + PUMP


seeds = {"io": io(), "tmf": tmf(), "remap": remap(), "shrink": shrink(), "restart": restart(),
         "bad_chains": bad_chains(), "poke": poke()}
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "target_session")
os.makedirs(here, exist_ok=True)
for name, blob in seeds.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(blob)
