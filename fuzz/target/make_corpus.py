#!/usr/bin/env python3
"""Write the seed inputs of fuzz_target_session into fuzz/corpus/target_session/ and of
fuzz_target_rpc into fuzz/corpus/target_rpc/.

An input: [u16 n][n bytes of guest memory] then operations (fuzz_target_session.c):
a vhost-user message (op 0x00, then [fd byte][request u32][flags u32][size u32][payload];
fd byte: low 4 bits = fd count, bit 6 = eventfds, bit 7 = dups of the guest memfd, bit 5
= dups of the dirty log file), a kick (0x40 | queue), a guest memory write (0x80, u16
offset, u8 len, bytes), a shrink of the guest memory file (0xc0 | 4 KiB units), passes
(0xe0), the dirty log file's size (0xf0 | index into LOG_SIZES, session.c's fz_log_sizes;
4096 bytes at the start of an input); the in-flight file (0x78-0x7c: bytes, a ring's
header, a descriptor's entry, its size, the other file; fd kind bit 4 = dups of it).
fuzz_target_rpc adds: a kick with one pass only (0x30 | queue: what it pops stays in
flight), a request (0x38 + method, form, dictionary indexes), a batch (0x3e), a raw line
(0x3f, u16 length, bytes); the indexes below name entries of its dictionaries.

Guest memory (256 KiB, one region at guest address 0, user address UVA):
  0x000 + q * 0x200   ring q, 16 entries: descriptors, avail at +0x100, used at +0x140
  0x800 + s * 0x100   slot s < 8: request header at +0, response at +0x40
  0x1000 + s * 0x200  slot s < 8's data (512 bytes)
  0x2000, 0x4000      slots 8..23 and their data (the target_rpc seeds)
"""
import os
import struct

UVA = 0x7f0000000000
MEM = 256 << 10
QSIZE = 16
NEXT, WRITE = 1, 2
EVT, MEMFD, LOGFD = 0x40, 0x80, 0x20
NEED_REPLY = 8


def msg(req, payload=b"", nfds=0, flags=1):
    return b"\x00" + bytes([nfds]) + struct.pack("<III", req, flags, len(payload)) + payload


def u64(v):
    return struct.pack("<Q", v)


def state(i, n):
    return struct.pack("<II", i, n)


def ring_base(q):
    return q * 0x200


def slot(s):
    return 0x800 + s * 0x100 if s < 8 else 0x2000 + (s - 8) * 0x100


def data(s):
    return 0x1000 + s * 0x200 if s < 8 else 0x4000 + (s - 8) * 0x200


def mem_table(size=MEM, offset=0):
    return msg(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0, size, UVA, offset),
               1 | MEMFD)


def ring_setup(q):
    base = ring_base(q)
    addr = struct.pack("<IIQQQQ", q, 0, UVA + base, UVA + base + 0x140, UVA + base + 0x100, 0)
    return (msg(8, state(q, QSIZE)) + msg(10, state(q, 0)) + msg(9, addr) +
            msg(13, u64(q), 1 | EVT) + msg(12, u64(q), 1 | EVT) + msg(18, state(q, 1)))


FEATURES = (1 << 32) | (1 << 28) | (1 << 29) | (1 << 30)
SETUP = (msg(1) + msg(15) + msg(16, u64(0x9)) + msg(17) + msg(3) +
         msg(2, u64(FEATURES)) + mem_table() +
         b"".join(ring_setup(q) for q in range(4)))

# ---- dirty logging (live migration) -----------------------------------------------------
LOG_ALL = 1 << 26
LOG_SHMFD = 1 << 1
# session.c's fz_log_sizes, by index: keep these in step with the C array.
LOG_SIZES = [0, 1, 4, 8, 64, 4095, 4096, 4097, 8192, 12288, 16384, 32768, 65536, 65544,
             262144, 1 << 20]
# One bit per 4 KiB page in u64 words, as QEMU sizes it: 256 KiB of guest memory, 8 bytes.
LOG_BYTES = 8
# SETUP with LOG_SHMFD acked (MQ, LOG_SHMFD, REPLY_ACK).
LOG_SETUP = (msg(1) + msg(15) + msg(16, u64(0x9 | LOG_SHMFD)) + msg(17) + msg(3) +
             msg(2, u64(FEATURES)) + mem_table() +
             b"".join(ring_setup(q) for q in range(4)))


def log_base(size=LOG_BYTES, offset=0, fd=1 | LOGFD, flags=1):
    """SET_LOG_BASE: the log is [offset, offset + size) of the file fd (the log file)."""
    return msg(6, struct.pack("<QQ", size, offset), fd, flags)


def log_file(size):
    return bytes([0xf0 | LOG_SIZES.index(size)])


def vring_addr(q, log=False, log_gpa=None, desc_shift=0, flags=1):
    """SET_VRING_ADDR of ring q at its usual place; with VHOST_VRING_F_LOG, log_gpa (by
    default the used ring's own guest address, as QEMU sends it)."""
    base = ring_base(q)
    if log_gpa is None:
        log_gpa = base + 0x140
    return msg(9, struct.pack("<IIQQQQ", q, 1 if log else 0, UVA + base + desc_shift,
                              UVA + base + 0x140, UVA + base + 0x100, log_gpa), flags=flags)


def logging(on, rings=range(4), features=FEATURES):
    """Logging on or off as QEMU's vhost_dev_set_log does it: SET_FEATURES with or without
    LOG_ALL, then every ring's address with or without VHOST_VRING_F_LOG."""
    return (msg(2, u64(features | (LOG_ALL if on else 0))) +
            b"".join(vring_addr(q, on) for q in rings))


class Guest:
    """Guest memory with chains made available on the rings."""

    def __init__(self, size=0x2000, trim=False):
        self.mem = bytearray(size)
        self.trim = trim  # image() without the trailing zeros (the rest is zeros anyway)
        self.next_desc = [0] * 4
        self.avail = [0] * 4
        self.shadow = None

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

    def event_buf(self, s):
        """A buffer for one event (virtio_scsi_event, 16 bytes) on the event queue."""
        self.chain(1, [(slot(s), 16, True)])

    def image(self):
        self.shadow = bytes(self.mem)
        mem = bytes(self.mem).rstrip(b"\0") if self.trim else bytes(self.mem)
        return struct.pack("<H", len(mem)) + mem

    def flush(self):
        """Memory writes (op 0x80) of what changed since image() or the last flush."""
        out = b""
        i = 0
        while i < len(self.mem):
            if self.mem[i] == self.shadow[i]:
                i += 1
                continue
            j = i
            while j < len(self.mem) and j - i < 255 and self.mem[j] != self.shadow[j]:
                j += 1
            out += b"\x80" + struct.pack("<HB", i, j - i) + bytes(self.mem[i:j])
            i = j
        self.shadow = bytes(self.mem)
        return out


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


def log_read():
    """A WRITE of a pattern, then a valid log, logging on, and a READ of it (into zeros: its
    data page, its response's and the used ring's change and must be marked), an INQUIRY
    and an event buffer; logging off and a READ again."""
    g = Guest()
    g.scsi(2, 0, rw10(0x2a, 8, 1), out=b"\x5a" * 512)
    head = g.image() + LOG_SETUP + kick(2) + PUMP
    g.scsi(2, 1, rw10(0x28, 8, 1), in_len=512)
    g.scsi(3, 2, bytes([0x12, 0, 0, 0, 96, 0]), in_len=96)
    g.scsi(2, 3, rw10(0x28, 8, 2), in_len=1024)
    io1 = g.flush() + kick(2) + kick(3) + PUMP
    g.scsi(3, 4, rw10(0x28, 8, 1), in_len=512)
    io2 = g.flush() + kick(3) + PUMP
    return head + log_base() + logging(True) + io1 + logging(False) + io2


def log_used_elsewhere():
    """Logging on with ring 2's used ring not logged and ring 3's logged at another guest
    address (the frontend's word); LOG_ALL before any log (the rings start without one and
    restart when it comes), a log at an odd offset of a bigger file."""
    g = Guest()
    g.scsi(2, 0, rw10(0x2a, 16, 1), out=b"\xa5" * 512)
    g.scsi(3, 1, rw10(0x2a, 17, 1), out=b"\x3c" * 512)
    head = g.image() + LOG_SETUP + kick(2) + kick(3) + PUMP
    g.scsi(2, 2, rw10(0x28, 16, 1), in_len=512)
    g.scsi(3, 3, rw10(0x28, 17, 1), in_len=512)
    io = g.flush() + kick(2) + kick(3) + PUMP
    on = (msg(2, u64(FEATURES | LOG_ALL)) + vring_addr(0, True) + vring_addr(1, True) +
          vring_addr(2, False) + vring_addr(3, True, 0x20000))
    return head + on + log_file(8192) + log_base(LOG_BYTES, 4093) + io


def log_refused():
    """Logs the target must not take, each answered (NEED_REPLY: the session goes on):
    before LOG_SHMFD, too small for guest memory, zero bytes, larger than its file, at an
    offset that wraps, without an fd, with /dev/null, in an empty file; the guest memory
    file as the log (taken: a memory file); then one without NEED_REPLY (the session ends)
    and a valid one in a new session, with I/O."""
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 0, 1), in_len=512)
    nr = 1 | NEED_REPLY
    bad = (log_base(4, flags=nr) + log_base(0, flags=nr) + log_base(LOG_BYTES, 4090, flags=nr) +
           log_base(4097, flags=nr) + log_base(LOG_BYTES, (1 << 64) - 4, flags=nr) +
           log_base(1 << 38, flags=nr) + log_base(fd=0, flags=nr) + log_base(fd=1, flags=nr) +
           log_file(0) + log_base(flags=nr) + log_file(4096) + log_base(fd=1 | MEMFD, flags=nr))
    return (g.image() + SETUP + log_base(flags=nr) + msg(16, u64(0x9 | LOG_SHMFD)) + bad +
            logging(True) + kick(2) + PUMP + log_base(4) + LOG_SETUP + log_base() +
            logging(True) + kick(2) + PUMP)


def log_shrunk():
    """Logging on, a READ; then the log file shrunk under the target (to nothing: the next
    completion's mark faults, the session ends); again in a new session with the log a page
    into an 8 KiB file shrunk to its first page; then a session with I/O after."""
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 1, 1), in_len=512)
    head = g.image() + LOG_SETUP + log_base() + logging(True) + kick(2) + PUMP
    g.scsi(2, 1, rw10(0x28, 2, 1), in_len=512)
    io1 = g.flush()
    g.scsi(2, 2, rw10(0x28, 3, 1), in_len=512)
    io2 = g.flush()
    g.scsi(3, 3, rw10(0x28, 4, 1), in_len=512)
    io3 = g.flush()
    return (head + io1 + log_file(0) + kick(2) + PUMP + log_file(8192) + LOG_SETUP +
            log_base(LOG_BYTES, 4096) + logging(True) + log_file(4096) + io2 + kick(2) + PUMP +
            log_file(4096) + LOG_SETUP + log_base() + logging(True) + io3 + kick(3) + PUMP)


def log_toggle():
    """Logging switched on and off under running rings with requests between, a second log
    replacing the first while logging, SET_VRING_ADDR with VHOST_VRING_F_LOG on a started
    ring at a log address beyond the log (it does not start), with new addresses (refused:
    started), on a stopped ring (the refusals with NEED_REPLY: the session goes on); a memory
    table beyond the log while logging (refused: the session ends)."""
    g = Guest(0x6000, trim=True)
    for s in range(6):
        g.scsi(2 + s % 2, s, rw10(0x2a, s, 1), out=bytes([s + 1]) * 512)
    head = g.image() + LOG_SETUP + kick(2) + kick(3) + PUMP + log_base()
    out = head
    for i in range(3):
        g.scsi(2 + i % 2, 6 + i, rw10(0x28, i, 1), in_len=512)
        out += logging(True) + g.flush() + kick(2 + i % 2) + logging(False) + PUMP
    g.scsi(2, 9, rw10(0x28, 5, 1), in_len=512)
    out += (logging(True) + log_file(8192) + log_base(16, 4096) + g.flush() + kick(2) + PUMP +
            vring_addr(3, True, 1 << 40, flags=1 | NEED_REPLY) +
            vring_addr(2, True, desc_shift=0x10, flags=1 | NEED_REPLY) +
            msg(11, state(3, 0)) + vring_addr(3, True) + msg(10, state(3, 0)) +
            msg(12, u64(3), 1 | EVT) + mem_table(MEM, 0) + kick(3) + PUMP)
    return out + msg(5, struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 1 << 30, MEM, UVA, 0),
                     1 | MEMFD) + PUMP


def log_stale():
    """A log sized for 128 KiB of guest memory, logging off; memory grows to 256 KiB (taken:
    no logging); logging on with the log as it is: a READ into the pages beyond the log."""
    g = Guest()
    g.scsi(2, 0, rw10(0x2a, 8, 1), out=b"\x77" * 512)
    half = mem_table(MEM // 2)
    head = (g.image() + msg(1) + msg(15) + msg(16, u64(0x9 | LOG_SHMFD)) + msg(3) +
            msg(2, u64(FEATURES)) + half + b"".join(ring_setup(q) for q in range(4)) +
            log_base(4) + kick(2) + PUMP + mem_table())
    g.chain(2, [(slot(1), 51, False), (slot(1) + 0x40, 108, True), (0x30000, 512, True)])
    g.put(slot(1), bytes([1, 0, 0x40, 0, 0, 0, 0, 0]) + struct.pack("<QBBB", 0, 0, 0, 0) +
          rw10(0x28, 8, 1).ljust(32, b"\0"))
    return head + logging(True) + g.flush() + kick(2) + PUMP


# ---- in-flight tracking (INFLIGHT_SHMFD) ----------------------------------------------------
INFLIGHT_SHMFD = 1 << 12
INFL = 0x10  # fd kind: the in-flight file in use (own memfd, or GET_INFLIGHT_FD's region)
# session.c's fz_infl_sizes, by index: keep these in step with the C array.
RING_BYTES16 = (16 + 16 * 16 + 63) & ~63
INFL_SIZES = [0, 64, RING_BYTES16, 4 * RING_BYTES16, 4096, 8192, 16384, 65536]


def inflight(nq=4, qsize=16, size=None, offset=0):
    if size is None:
        size = nq * ((16 + 16 * qsize + 63) & ~63)
    return struct.pack("<QQHHI", size, offset, nq, qsize, 0)


def get_inflight(nq=4, qsize=16, flags=1):
    return msg(31, inflight(nq, qsize, 0), 0, flags)


def set_inflight(nq=4, qsize=16, size=None, offset=0, fd=1 | INFL, flags=1):
    return msg(32, inflight(nq, qsize, size, offset), fd, flags)


def infl_header(q, version=1, desc_num=16, last_batch=0, used=0, qlog=4):
    return b"\x79" + bytes([q, qlog]) + struct.pack("<HHHH", version, desc_num, last_batch, used)


def infl_desc(q, head, mark=1, nxt=0, counter=0, qlog=4):
    return b"\x7a" + bytes([q, qlog]) + struct.pack("<HBHH", head, mark, nxt, counter)


def infl_size(size):
    return b"\x7b" + bytes([INFL_SIZES.index(size)])


INFL_OTHER = b"\x7c"


def infl_setup(region=b""):
    """SETUP with INFLIGHT_SHMFD acked (MQ, REPLY_ACK, INFLIGHT_SHMFD) and region (GET or SET
    of an in-flight region) before the rings, as QEMU sends it."""
    return (msg(1) + msg(15) + msg(16, u64(0x9 | INFLIGHT_SHMFD)) + msg(17) + msg(3) + region +
            msg(2, u64(FEATURES)) + mem_table() + b"".join(ring_setup(q) for q in range(4)))


def inflight_get():
    """GET_INFLIGHT_FD's region for 4 rings of 16, rings laid out on it, READs answered; then
    ring 2 stopped with a READ in flight (GET_VRING_BASE) and a new session handing the same
    region back (SET_INFLIGHT_FD of GET's fd): nothing in flight, it starts at its used
    index."""
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 0, 1), in_len=512)
    g.scsi(3, 1, rw10(0x28, 1, 1), in_len=512)
    head = g.image() + infl_setup(get_inflight()) + kick(2) + kick(3) + PUMP
    g.scsi(2, 2, rw10(0x28, 2, 1), in_len=512)
    io = g.flush() + kick(2)
    return (head + io + msg(11, state(2, 0)) + msg(34) + infl_setup(set_inflight()) + kick(2) +
            PUMP)


def inflight_resubmit():
    """A target killed with two READs of ring 2 taken (heads 0 and 3 marked in flight, in the
    order they were taken) and a third made available: the frontend's region handed to a new
    one resubmits heads 0 and 3 first and then takes the third from the avail ring; then the
    same with the last batch not yet cleared (the region's used index lags by one, its batch
    list through head 0)."""
    g = Guest()
    for s in range(3):
        g.scsi(2, s, rw10(0x28, s, 1), in_len=512)
    region = (infl_header(2) + infl_desc(2, 0, counter=5) + infl_desc(2, 3, counter=6) +
              infl_header(0) + infl_header(1) + infl_header(3))
    first = g.image() + region + infl_setup(set_inflight()) + kick(2) + PUMP
    lag = (infl_size(16384) + infl_size(0) + infl_size(16384) + infl_header(2, used=0xffff) +
           infl_desc(2, 0, counter=1) + infl_desc(2, 3, counter=2) + infl_desc(2, 6, counter=3))
    return first + lag + msg(34) + infl_setup(set_inflight()) + kick(2) + PUMP


def inflight_lies():
    """Regions the target must refuse: SET_INFLIGHT_FD without an fd, of /dev/null, smaller
    than its rings need, at an offset that wraps, for no queues and rings of 3; GET before
    INFLIGHT_SHMFD, of shapes it cannot have; then regions whose ring 2 part lies (version
    2, desc_num 8, a mark of 7, two marked with nothing available, a last batch through head
    99), each in a session of its own (the enable refused with NEED_REPLY: the session goes
    on), with I/O on ring 3; a SET while rings run."""
    g = Guest()
    g.scsi(3, 0, rw10(0x28, 0, 1), in_len=512)
    nr = 1 | NEED_REPLY
    out = g.image() + get_inflight(flags=nr)
    out += msg(1) + msg(15) + msg(16, u64(0x9 | INFLIGHT_SHMFD)) + msg(17) + msg(3)
    out += (set_inflight(fd=0, flags=nr) + set_inflight(fd=1, flags=nr) +
            set_inflight(size=64, flags=nr) + set_inflight(offset=(1 << 64) - 8, flags=nr) +
            set_inflight(nq=0, flags=nr) + set_inflight(qsize=3, flags=nr) +
            get_inflight(0, flags=nr) + get_inflight(9, flags=nr) + get_inflight(4, 3, flags=nr))
    for lie in (infl_header(2, version=2), infl_header(2, desc_num=8),
                infl_header(2) + infl_desc(2, 1, mark=7),
                infl_header(2) + infl_desc(2, 0) + infl_desc(2, 5),
                infl_header(2, last_batch=99, used=0xffff) + infl_desc(2, 0)):
        out += (infl_size(0) + infl_size(16384) + lie + msg(34) +
                infl_setup(set_inflight()) + msg(18, state(2, 1), 0, nr) + kick(3) + PUMP)
    return out + set_inflight(flags=nr) + kick(3) + PUMP


def inflight_shrunk():
    """The frontend's own region (not sealed) shrunk under running rings: to a header, and to
    nothing (the next mark faults: the session ends); the sealed region GET made cannot
    shrink; then a session with I/O after."""
    g = Guest()
    g.scsi(2, 0, rw10(0x28, 0, 1), in_len=512)
    head = g.image() + infl_setup(set_inflight()) + kick(2) + PUMP
    g.scsi(2, 1, rw10(0x28, 1, 1), in_len=512)
    io1 = g.flush()
    g.scsi(2, 2, rw10(0x28, 2, 1), in_len=512)
    io2 = g.flush()
    return (head + infl_size(64) + io1 + kick(2) + PUMP + msg(34) + infl_size(16384) +
            infl_setup(get_inflight()) + infl_size(0) + io2 + kick(2) + PUMP + INFL_OTHER +
            infl_size(0) + SETUP + kick(2) + PUMP)


session_seeds = {"io": io(), "tmf": tmf(), "remap": remap(), "shrink": shrink(),
                 "restart": restart(), "bad_chains": bad_chains(), "poke": poke(),
                 "log_read": log_read(), "log_used_elsewhere": log_used_elsewhere(),
                 "log_refused": log_refused(), "log_shrunk": log_shrunk(),
                 "log_toggle": log_toggle(), "log_stale": log_stale(),
                 "inflight_get": inflight_get(), "inflight_resubmit": inflight_resubmit(),
                 "inflight_lies": inflight_lies(), "inflight_shrunk": inflight_shrunk()}

# ---- fuzz_target_rpc --------------------------------------------------------------------
# Its dictionaries (fuzz_target_rpc.c), by index: keep these in step with the C arrays.
LUN_ADD, LUN_REMOVE, LUN_RESIZE, LUN_LIST, STATS, TRACE_SET = range(6)
ID = {0: 0, 1: 1, 2: 2, 3: 3, 255: 4, 256: 5, -1: 6, "str": 7, "frac": 8, "null": 9, "big": 10}
SIZE = {0: 0, 512: 1, 4096: 2, 1 << 20: 3, 2 << 20: 4, 4 << 20: 5, (1 << 20) + 1: 6, 513: 7,
        "4K": 8, "1M": 9, "3M": 10, "16E": 11, "1T": 12, "64G": 13, "1.5M": 14, -512: 15,
        "": 16, "true": 17, "i64max": 18, "overflow": 19}
TRACE = {"info:all": 0, "verbose:io,queue": 1, "debug:all": 2, "error": 3, "off": 4,
         "warning:target.all": 5, "verbose:rpc.all": 6, "bogus": 7, "info:nosuchflag": 8,
         ":": 9, "verbose:,,,": 10, "": 11, "number": 12, "long": 13}
SPEC = {"ram=1M": 0, "ram=4M": 1, "ram=512": 2, "ram=513": 3, "ram=0": 4, "ram=junk": 5,
        "ram=1\\u004d": 6, "ram=8M": 7, "null=1M": 8, "null=4K": 9, "null=0": 10,
        "null=16777215T": 11, "null=2^64-512": 12, "null=2^63": 13, "null=1M,delay=1000": 14,
        "rbd": 15, "file=/etc/passwd": 16, "bogus": 17, "": 18, "ram=1M,log-writes": 19, "number": 20,
        "null": 21, "file=A": 22, "file=A,ro": 23, "file=B": 24, "file=B,direct": 25,
        "file=odd": 26, "file=empty": 27, "file=A,rw": 28, "file=A,log-writes": 29}
# form bits: id 0 number, 1 string, 2 none (notification), 3 null; 4 an unknown param;
# 8 params as an array; 0x10 no params.
NOTIFY, STRID, NULLID, EXTRA, ARRAY, NOPARAMS = 2, 1, 3, 4, 8, 0x10


def kick1(q):
    return bytes([0x30 | q])


def req(method, *params, form=0):
    return bytes([0x38 + method, form]) + bytes(params)


def add(lun, spec, form=0):
    return req(LUN_ADD, ID[lun], SPEC[spec], form=form)


def remove(lun, form=0):
    return req(LUN_REMOVE, ID[lun], form=form)


def resize(lun, size, form=0):
    return req(LUN_RESIZE, ID[lun], SIZE[size], form=form)


def trace(spec, form=0):
    return req(TRACE_SET, TRACE[spec], form=form)


LIST, STAT = req(LUN_LIST), req(STATS)


def batch(*reqs):
    """reqs: the bytes of req() calls (their op byte becomes the method byte)."""
    return b"\x3e" + bytes([len(reqs) - 1]) + b"".join(
        bytes([r[0] - 0x38]) + r[1:] for r in reqs)


def raw(line):
    return b"\x3f" + struct.pack("<H", len(line)) + line


def rw16(op, lba, n):
    return bytes([op, 0]) + struct.pack(">QI", lba, n) + b"\0\0"


READ_CAP16 = bytes([0x9e, 0x10]) + b"\0" * 8 + struct.pack(">I", 32) + b"\0\0"
ABORT_TASK, LUN_RESET, IT_NEXUS_RESET = 0, 5, 6


def rpc_methods():
    """Each method once, with the guest's I/O before and after the changes."""
    g = Guest(0x6000, trim=True)
    for s in range(1, 5):
        g.event_buf(s)
    head = g.image() + SETUP + kick(1)
    g.scsi(2, 0, rw10(0x2a, 8, 1), out=b"\x5a" * 512, lun=2)
    io2 = g.flush() + kick(2)
    g.scsi(2, 8, rw10(0x28, 8, 1), in_len=512, lun=3)
    g.scsi(3, 9, READ_CAP16, in_len=32, lun=3)
    g.scsi(3, 10, rw10(0x28, 8, 1), in_len=512, lun=2)
    return (head + io2 + LIST + STAT + add(3, "ram=1M") + resize(3, 2 << 20) + resize(2, "3M") +
            LIST + g.flush() + kick(2) + kick(3) + kick(1) + trace("verbose:io,queue") +
            STAT + remove(3) + add(3, "file=B") + trace("bogus") + LIST + kick(1) + PUMP)


def rpc_errors():
    """What the request checks and the target refuse, in each form a request can take."""
    lines = [b"not json", b"[]", b"[1,2]", b"{}", b'{"jsonrpc":"2.0"}',
             b'{"jsonrpc":"2.0","method":"shutdown","id":1}',
             b'{"jsonrpc":"2.0","method":"nope","id":2}',
             b'{"jsonrpc":"1.0","method":"stats","id":3}',
             b'{"jsonrpc":"2.0","method":"stats","id":{}}',
             b'{"jsonrpc":"2.0","method":"stats","method":"lun_list","id":4}',
             b'{"jsonrpc":"2.0","method":"lun_add","params":{"id":3,"spec":"ram=1M\\u0000x"},"id":5}',
             b'{"jsonrpc":"2.0","method":"lun_resize","params":{"id":0,"size":"2M"}}',
             b'[{"jsonrpc":"2.0","method":"lun_list","id":6},{"jsonrpc":"2.0","method":"stats"}]',
             b'{"jsonrpc":"2.0","method":"lun_add","params":{"id":3,"spec":"ram=64K"},"id":7}',
             b'{"jsonrpc":"2.0","method":"lun_add","params":{"id":3,"spec":"file=/dev/zero"},"id":8}']
    g = Guest(trim=True)
    head = g.image() + SETUP
    g.scsi(2, 0, rw10(0x28, 0, 1), in_len=512, lun=1)
    return (head + add(256, "ram=1M") + add("str", "ram=1M") + add(0, "ram=1M") +
            add(3, "number") + add(3, "null") + resize(0, 0) + resize(0, 513) + resize(1, 2 << 20) +
            resize(0, 512) + resize(0, "overflow") + resize(0, -512) + resize(0, "true") +
            remove(255) + remove(-1) + remove("frac") + remove("null") + remove("big") +
            LIST + req(LUN_LIST, form=EXTRA) + add(3, "ram=1M", form=ARRAY) +
            remove(1, form=NOPARAMS) + STAT + req(STATS, form=STRID) +
            req(STATS, form=NULLID) + req(STATS, form=NOTIFY) + add(3, "ram=1M", form=NOTIFY) +
            remove(3, form=NOTIFY | EXTRA) + b"".join(raw(line) for line in lines) +
            g.flush() + kick(2) + PUMP)


def rpc_specs():
    """Every spec of the dictionary: the filter's refusals, the backends' own, and LUNs
    of odd sizes the guest then reads and writes at their ends."""
    g = Guest(0x6000, trim=True)
    head = g.image() + SETUP
    out = head
    for spec in SPEC:
        out += add(3, spec) + LIST + remove(3)
    g.scsi(2, 8, READ_CAP16, in_len=32, lun=3)
    g.scsi(2, 9, rw16(0x88, (1 << 55) - 2, 1), in_len=512, lun=3)
    g.scsi(3, 10, rw16(0x8a, (1 << 55) - 1, 1), out=b"\1" * 512, lun=3)
    g.scsi(3, 11, bytes([0x25] + [0] * 9), in_len=8, lun=3)
    io3 = g.flush() + kick(2) + kick(3) + PUMP
    g.scsi(2, 12, READ_CAP16, in_len=32, lun=3)
    g.scsi(3, 13, rw16(0x8a, 1 << 40, 1), out=b"\2" * 512, lun=3)
    io3b = g.flush() + kick(2) + kick(3) + PUMP
    g.scsi(3, 14, rw10(0x2a, 0, 1), out=b"\3" * 512, lun=3)
    io3c = g.flush() + kick(3) + PUMP
    return (out + add(3, "null=2^64-512") + io3 + remove(3) + add(3, "null=16777215T") +
            io3b + remove(3) + add(3, "file=A,ro") + io3c)


def remove_in_flight():
    """READ and WRITE of LUN 0 in flight when it is removed; TMFs for it (ABORT TASK, LUN
    RESET, I_T NEXUS RESET) after; re-added with new I/O in flight, met by a TMF, and
    removed again under it."""
    g = Guest(0x6000, trim=True)
    g.event_buf(2)
    g.event_buf(3)
    head = g.image() + SETUP + kick(1)
    g.scsi(2, 0, rw10(0x28, 0, 1), in_len=512, tag=7)
    g.scsi(2, 1, rw10(0x2a, 2, 1), out=b"\x33" * 512, tag=8)
    io1 = g.flush() + kick1(2)
    g.tmf(4, ABORT_TASK, 7)
    g.tmf(5, LUN_RESET, 0)
    g.tmf(6, IT_NEXUS_RESET, 0)
    tmfs = g.flush() + kick(0)
    g.scsi(2, 8, rw10(0x28, 2, 1), in_len=512, tag=9)
    g.scsi(3, 9, rw10(0x2a, 4, 1), out=b"\x44" * 512, tag=10)
    io2 = g.flush() + kick1(2) + kick1(3)
    g.tmf(10, ABORT_TASK, 9)
    g.tmf(11, LUN_RESET, 0)
    tmfs2 = g.flush() + kick1(0)
    g.scsi(2, 12, rw10(0x28, 6, 1), in_len=512, tag=11)
    g.scsi(3, 13, rw10(0x2a, 6, 1), out=b"\x45" * 512, tag=12)
    io3 = g.flush() + kick1(2) + kick1(3)
    return (head + io1 + remove(0) + tmfs + add(0, "ram=1M") + io2 + tmfs2 + io3 +
            remove(0) + kick(1) + PUMP)


def tmf_then_remove():
    """A LUN RESET for in-flight commands of file LUN 2, then its removal while new ones are
    in flight, an I_T NEXUS RESET and an ABORT TASK after, and LUN 2 again as another file
    with a READ in flight."""
    g = Guest(0x6000, trim=True)
    head = g.image() + SETUP
    g.scsi(2, 0, rw10(0x2a, 0, 1), out=b"\x55" * 512, lun=2, tag=1)
    g.scsi(3, 1, rw10(0x28, 0, 1), in_len=512, lun=2, tag=2)
    io1 = g.flush() + kick1(2) + kick1(3)
    g.tmf(4, LUN_RESET, 0, lun=2)
    reset = g.flush() + kick1(0)
    g.scsi(2, 8, rw10(0x28, 0, 1), in_len=512, lun=2, tag=3)
    g.scsi(3, 9, rw10(0x2a, 1, 1), out=b"\x66" * 512, lun=2, tag=4)
    io2 = g.flush() + kick1(2) + kick1(3)
    g.tmf(5, IT_NEXUS_RESET, 0, lun=2)
    g.tmf(6, ABORT_TASK, 3, lun=2)
    tmfs = g.flush() + kick1(0)
    g.scsi(2, 10, rw10(0x28, 0, 1), in_len=512, lun=2, tag=5)
    io3 = g.flush() + kick1(2)
    g.tmf(7, ABORT_TASK, 5, lun=2)
    return (head + io1 + reset + io2 + remove(2) + tmfs + add(2, "file=B") + io3 +
            g.flush() + kick(0) + PUMP)


def resize_in_flight():
    """Resizes while commands are in flight: file LUN 2 shrunk under a WRITE past the new
    end and grown again, RAM LUN 0 grown under a READ; the capacity read after each."""
    g = Guest(0x6000, trim=True)
    g.event_buf(1)
    g.event_buf(2)
    head = g.image() + SETUP + kick(1)
    g.scsi(2, 0, rw10(0x2a, 64, 1), out=b"\x77" * 512, lun=2)
    g.scsi(3, 3, rw10(0x28, 2040, 1), in_len=512, lun=0)
    io1 = g.flush() + kick1(2) + kick1(3)
    g.scsi(2, 8, READ_CAP16, in_len=32, lun=2)
    g.scsi(3, 9, rw10(0x28, 64, 1), in_len=512, lun=2)
    g.scsi(2, 10, READ_CAP16, in_len=32, lun=0)
    io2 = g.flush() + kick1(2) + kick1(3)
    return (head + io1 + resize(2, 4096) + resize(0, 4 << 20) + io2 + resize(2, 2 << 20) +
            resize(2, "64G") + resize(0, "1T") + kick(1) + PUMP + LIST)


def unmap(*ranges):
    """UNMAP's CDB and parameter list: one descriptor per (lba, blocks); each after the
    first is one more step, a completion later (the command holds its LUN between)."""
    descs = b"".join(struct.pack(">QI4x", lba, n) for lba, n in ranges)
    params = struct.pack(">HH4x", 6 + len(descs), len(descs)) + descs
    return bytes([0x42, 0, 0, 0, 0, 0, 0]) + struct.pack(">H", len(params)) + b"\0", params


def multistep_in_flight():
    """Commands of several steps (UNMAP of three ranges) in flight on RAM LUN 0 and file
    LUN 2 when they are removed; then on the re-added LUNs under a LUN RESET and an
    I_T NEXUS RESET, and removed again."""
    g = Guest(0x6000, trim=True)
    head = g.image() + SETUP
    cdb, params = unmap((0, 8), (64, 8), (128, 8))
    g.scsi(2, 0, cdb, out=params, lun=0, tag=1)
    g.scsi(3, 1, cdb, out=params, lun=2, tag=2)
    io1 = g.flush() + kick1(2) + kick1(3)
    g.scsi(2, 8, cdb, out=params, lun=0, tag=3)
    g.scsi(3, 9, cdb, out=params, lun=2, tag=4)
    io2 = g.flush() + kick1(2) + kick1(3)
    g.tmf(4, LUN_RESET, 0, lun=0)
    g.tmf(5, IT_NEXUS_RESET, 0, lun=2)
    tmfs = g.flush() + kick1(0)
    g.scsi(2, 10, cdb, out=params, lun=0, tag=5)
    io3 = g.flush() + kick1(2)
    return (head + io1 + remove(0) + remove(2) + add(0, "ram=1M") + add(2, "file=A") + io2 +
            tmfs + io3 + remove(0) + kick(0) + PUMP)


def rpc_batch():
    """Batches: changes and lists in one line, notifications among them."""
    g = Guest(trim=True)
    head = g.image() + SETUP
    g.scsi(2, 0, rw10(0x28, 0, 1), in_len=512, lun=3)
    io = g.flush() + kick1(2)
    return (head + batch(add(3, "ram=4M"), LIST, resize(3, "1M"), STAT) + io +
            batch(remove(3), add(3, "null=1M", form=NOTIFY), LIST) +
            batch(req(STATS, form=NOTIFY), trace("error", form=NOTIFY)) + kick(2) + PUMP)


def rpc_trace():
    """trace_set under running I/O: valid settings, bad ones, a long one."""
    g = Guest(trim=True)
    out = g.image() + SETUP
    g.scsi(2, 0, rw10(0x2a, 8, 1), out=b"\x5a" * 512)
    g.scsi(2, 1, rw10(0x28, 8, 1), in_len=512)
    out += g.flush() + kick1(2)
    for spec in TRACE:
        out += trace(spec)
    return out + trace("verbose:io,queue") + kick(2) + trace("off") + PUMP


rpc_seeds = {"rpc_methods": rpc_methods(), "rpc_errors": rpc_errors(), "rpc_specs": rpc_specs(),
             "remove_in_flight": remove_in_flight(), "tmf_then_remove": tmf_then_remove(),
             "resize_in_flight": resize_in_flight(), "multistep_in_flight": multistep_in_flight(),
             "rpc_batch": rpc_batch(),
             "rpc_trace": rpc_trace()}
# The guest's seeds mean the same to fuzz_target_rpc (ops 0x30-0x3f are not in them).
rpc_seeds.update(session_seeds)

for corpus, seeds in (("target_session", session_seeds), ("target_rpc", rpc_seeds)):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", corpus)
    os.makedirs(here, exist_ok=True)
    for name, blob in seeds.items():
        with open(os.path.join(here, name), "wb") as f:
            f.write(blob)
