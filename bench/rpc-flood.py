#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""An operator's lun_list on a target's management socket while hostile clients flood it.

Usage: bench/rpc-flood.py RPC.sock [--hostile N ...] [--calls C] [--kind batch|lines|idle]

Each hostile client sends, as fast as its socket takes and never reading a reply:
  batch  64 KiB lines, each one batch of ~1,500 `stats` requests (issue 22's attacker)
  lines  `stats` requests one per line (pipelined)
  idle   nothing at all, after connecting
and connects again whenever the target closes it.  Meanwhile the operator connects, calls
lun_list and disconnects, C times, 50 ms apart; its latency (connect to reply) is printed
as median and max, in milliseconds, for each N given (0 included: the baseline).
"""
import argparse
import json
import select
import socket
import statistics
import threading
import time

STATS = b'{"jsonrpc":"2.0","id":1,"method":"stats"},'


def hostile_line(kind):
    if kind == "lines":
        return b'{"jsonrpc":"2.0","id":1,"method":"stats"}\n'
    body = STATS * ((65536 - 2) // len(STATS))
    return b"[" + body[:-1] + b"]\n"


class Flood(threading.Thread):
    """N clients that write and never read, reconnecting when dropped."""

    def __init__(self, path, n, kind):
        super().__init__(daemon=True)
        self.path, self.n, self.kind = path, n, kind
        self.line = hostile_line(kind)
        self.stop = threading.Event()
        self.reconnects = 0

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(self.path)
        s.setblocking(False)
        return [s, 0]  # the socket, and how much of the current line went out

    def run(self):
        socks = [self.connect() for _ in range(self.n)]
        while not self.stop.is_set():
            if self.kind == "idle":
                time.sleep(0.05)
                continue
            _, writable, _ = select.select([], [c[0] for c in socks], [], 0.05)
            for c in socks:
                if c[0] not in writable:
                    continue
                try:
                    sent = c[0].send(self.line[c[1]:])
                    c[1] = (c[1] + sent) % len(self.line)
                except BlockingIOError:
                    pass
                except OSError:  # dropped by the target: come back
                    c[0].close()
                    c[:] = self.connect()
                    self.reconnects += 1
        for c in socks:
            c[0].close()


def operator_call(path, timeout=60.0):
    t0 = time.monotonic()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    s.sendall(b'{"jsonrpc":"2.0","id":7,"method":"lun_list"}\n')
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = s.recv(65536)
        if not chunk:
            raise RuntimeError("the target closed the operator's connection: %r" % buf)
        buf += chunk
    s.close()
    reply = json.loads(buf)
    if "result" not in reply:
        raise RuntimeError("lun_list failed: %r" % reply)
    return (time.monotonic() - t0) * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--hostile", type=int, action="append")
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--kind", choices=["batch", "lines", "idle"], default="batch")
    a = ap.parse_args()
    for n in a.hostile or [0, 30, 62]:
        flood = Flood(a.socket, n, a.kind)
        flood.start()
        time.sleep(1.0)  # the flood under way
        ms = []
        for _ in range(a.calls):
            ms.append(operator_call(a.socket))
            time.sleep(0.05)
        flood.stop.set()
        flood.join()
        print("%-5s hostile %2d: lun_list median %8.2f ms  max %8.2f ms  (%d calls, "
              "%d hostile reconnects)" % (a.kind, n, statistics.median(ms), max(ms),
                                          len(ms), flood.reconnects))
        time.sleep(0.5)


if __name__ == "__main__":
    main()
