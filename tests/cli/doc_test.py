#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every shell command README.md and docs/*.md show, run (ctest: ops_cli.docs_commands_run).

    tests/cli/doc_test.py BUILD_DIR SOURCE_DIR [FILE:LINE ...]

A fenced block whose info string is sh, bash or shell is a script; one marked console is a
transcript whose "$ " lines are its commands.  Each is run in a scratch directory of its
own, with the build's tools first on PATH, under `bash -e -o pipefail` (as a user who
pastes it would see any failure), within a time limit; what it starts in the background
is killed at its end.  HTML comments on the lines right above a block's fence say how:

    <!-- doc-test: skip WHY -->          not run, and why (another test runs it, it needs
                                          QEMU...): reported, never silent
    <!-- doc-test: synopsis -->          a usage template: each `vioscope CMD [SUB]` line
                                          must name a command there is, and options its
                                          --help names (so the docs cannot offer options
                                          the tool does not have)
    <!-- doc-test: setup NAME -->        a fixture first (FIXTURES below)
    <!-- doc-test: replace OLD NEW -->   run with OLD replaced by NEW (a scratch path
                                          for /opt/vioscope, a shorter duration)
    <!-- doc-test: exit N -->            the status the block ends with (default 0)
    <!-- doc-test: expect TEXT -->       its output holds TEXT

Any other block may carry `synopsis` or `skip` too.  A shell block with none of these is
run as it is.  Exit 0 when every block ran as the docs say, 1 otherwise.
"""
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

SHELL_INFO = {"sh", "bash", "shell", "console"}
TIMEOUT = 120  # seconds per block

# Shell run before a block that asks for it (`setup NAME`); $BUILD is the build tree.
FIXTURES = {
    # An image file, as the docs' disk.img.
    "image": "truncate -s 64M disk.img\n",
    # A running target with a management socket, as docs/TARGET.md's examples assume:
    # LUN 0 in 64 MiB of RAM, 2 request queues, sockets ./vs.sock and ./vs-rpc.sock.
    "target": """vioscope target --socket ./vs.sock --rpc ./vs-rpc.sock --lun 0:ram=64M \\
    --queues 2 2>target.log &
end=$((SECONDS + 20))
until [ -S vs-rpc.sock ]; do
    [ $SECONDS -lt $end ] || { cat target.log; exit 99; }
    sleep 0.05
done
export VIOSCOPE_RPC_SOCKET=./vs-rpc.sock
""",
    # The build tree under the name the docs use.
    "build": 'ln -s "$BUILD" build\n',
    # vioscope installed into ./opt (the docs' /opt/vioscope, see `replace`).
    "installed": 'cmake --install "$BUILD" --prefix "$PWD/opt" >/dev/null\n',
    # The example's sources (examples/) in the current directory.
    "examples": 'cp "$SOURCE"/examples/*.c "$SOURCE"/examples/*.h .\n',
    # Both sides of a slowed request recorded into run/ (docs/TRACING.md's worked example).
    "recorded": """VIOSCOPE_TRACE=verbose:all VIOSCOPE_TRACE_RING=8M vioscope-all bench \\
    --target null=64M,delay=50000,delay-every=4 --profile rnd4k-q1t1 --time 0.3 \\
    --record run >/dev/null 2>&1
""",
}


class Block:
    def __init__(self, path, line, info, text, directives):
        self.path, self.line, self.info, self.text = path, line, info, text
        self.directives = directives

    def where(self):
        return f"{self.path}:{self.line}"

    def get(self, key):
        return [d[1] for d in self.directives if d[0] == key]


def blocks(path):
    """The fenced blocks of a Markdown file, with the doc-test directives above each."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = re.match(r"^```\s*(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start, info = i, m.group(1)
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        directives, k = [], start - 1
        while k >= 0 and lines[k].startswith("<!-- doc-test:"):
            d = re.match(r"<!-- doc-test: (\S+)\s*(.*?)\s*-->$", lines[k])
            if not d:
                raise SystemExit(f"{path}:{k + 1}: malformed doc-test directive")
            directives.insert(0, (d.group(1), d.group(2)))
            k -= 1
        out.append(Block(path, start + 1, info, "\n".join(lines[start + 1 : j]), directives))
        i = j + 1
    return out


def help_options(build, words):
    """The --options `vioscope WORDS --help` names, or None if it fails."""
    r = subprocess.run([os.path.join(build, "tools", "vioscope"), *words, "--help"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        return None
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", r.stdout))


def check_synopsis(b, build):
    """Each `vioscope CMD [SUB] ...` line (and its continuation lines) names options the
    command's --help names."""
    errors, cmd = [], None
    commands = subprocess.run([os.path.join(build, "tools", "vioscope"), "--help"],
                              capture_output=True, text=True).stdout
    listed = re.split(r"^commands:$", commands, flags=re.M | re.I)
    known = re.findall(r"^  (\S+) ", listed[-1], re.M) if len(listed) > 1 else []
    for line in b.text.split("\n"):
        code = line.split("#")[0]
        words = code.split()
        if words and re.match(r"^vioscope(-[a-z-]+)?$", words[0]):
            if len(words) < 2 or words[1] not in known:
                errors.append(f"'{line.strip()}': no such command")
                cmd = None
                continue
            cmd = [words[1]]
            opts = help_options(build, cmd)
            if len(words) > 2 and re.match(r"^[a-z]+$", words[2]):
                sub = help_options(build, cmd + [words[2]])
                if sub is not None:
                    opts = (opts or set()) | sub
            if opts is None:
                errors.append(f"'{line.strip()}': `vioscope {words[1]} --help` fails")
                cmd = None
                continue
        elif not (cmd and line.startswith(" ")):
            cmd = None
            continue
        for o in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", code):
            if o not in opts:
                errors.append(f"'{line.strip()}': {o} is not an option of vioscope "
                              f"{' '.join(cmd)} (see its --help)")
    return errors


def script_of(b):
    """The shell a block runs: a sh block as it is, under `set -e`; a console block's `$ `
    commands one by one, as typed: each line's status is that of its last command (so
    `cmd; echo "exit $?"` goes on), and the first that fails ends the block with it."""
    if b.info != "console":
        return "set -e -o pipefail\n" + b.text
    cmds, cur = [], []
    for line in b.text.split("\n"):
        if line.startswith("$ ") and not cur:
            cur = [line[2:]]
        elif cur:
            cur.append(line)
        else:
            continue
        if not cur[-1].endswith("\\"):
            cmds.append("\n".join(cur) + " || exit $?")
            cur = []
    return "set +e\n" + "\n".join(cmds)


def end_group(p, sig):
    """What a block left running (a target started with &) ends with it: sig to the block's
    process group, then wait (20 s, then SIGKILL) until none of it is left."""
    deadline = time.monotonic() + 20
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        return
    p.wait()  # the shell itself: reaped, so that what is left is the rest of its group
    try:
        while True:
            os.killpg(p.pid, 0)
            if time.monotonic() > deadline:
                os.killpg(p.pid, signal.SIGKILL)
                deadline = time.monotonic() + 20
            time.sleep(0.01)
    except ProcessLookupError:
        pass


def run_block(b, build, source):
    script = script_of(b)
    for r in b.get("replace"):
        old, new = shlex.split(r)
        if old not in script:
            return [f"replace: '{old}' is not in the block"]
        script = script.replace(old, new)
    prelude = "".join(FIXTURES[name] for name in b.get("setup"))
    want = int((b.get("exit") or ["0"])[0])
    with tempfile.TemporaryDirectory(prefix="vs-doc-") as tmp:
        os.mkdir(os.path.join(tmp, "trace"))
        env = dict(os.environ, BUILD=build, SOURCE=source,
                   PATH=os.path.join(build, "tools") + ":" + os.environ["PATH"],
                   VIOSCOPE_TRACE_DIR=os.path.join(tmp, "trace"))
        env.pop("VIOSCOPE_RPC_SOCKET", None)
        full = "set -e -o pipefail\n" + prelude + script + "\n"
        # Output to a file, not a pipe: what the block leaves running in the background
        # holds its stdout open, and the block is done when its shell is.
        with open(os.path.join(tmp, ".output"), "w+") as log:
            p = subprocess.Popen(["bash", "-c", full], cwd=tmp, env=env, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=True)
            try:
                p.wait(timeout=TIMEOUT)
                late = False
            except subprocess.TimeoutExpired:
                late = True
            end_group(p, signal.SIGKILL if late else signal.SIGTERM)
            log.seek(0)
            out = log.read()
        if late:
            return [f"did not finish within {TIMEOUT} s:\n{out[-3000:]}"]
    errors = []
    if p.returncode != want:
        errors.append(f"exited {p.returncode}, the docs say {want}:\n{out[-3000:]}")
    for text in b.get("expect"):
        if text not in out:
            errors.append(f"its output lacks '{text}':\n{out[-3000:]}")
    return errors


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    only = set(sys.argv[3:])
    docs = [os.path.join(source, "README.md")] + sorted(
        os.path.join(source, "docs", f) for f in os.listdir(os.path.join(source, "docs"))
        if f.endswith(".md"))
    failed = ran = checked = skipped = 0
    for path in docs:
        for b in blocks(path):
            rel = os.path.relpath(b.path, source)
            b.path = rel
            if only and b.where() not in only:
                continue
            keys = {d[0] for d in b.directives}
            unknown = keys - {"skip", "synopsis", "setup", "replace", "exit", "expect"}
            errors = [f"unknown doc-test directive {sorted(unknown)}"] if unknown else []
            if "skip" in keys:
                why = b.get("skip")[0]
                if not why:
                    errors.append("skip needs a reason")
                print(f"skip {b.where()}: {why}")
                skipped += 1
            elif "synopsis" in keys:
                errors += check_synopsis(b, build)
                checked += 1
            elif b.info in SHELL_INFO:
                errors += run_block(b, build, source)
                ran += 1
            elif keys:
                errors.append("doc-test directives on a block that is not shell")
            for e in errors:
                print(f"FAIL {b.where()}: {e}")
            failed += bool(errors)
            if not errors and "skip" not in keys and (b.info in SHELL_INFO or keys):
                print(f"ok   {b.where()}")
    print(f"doc-test: {ran} blocks run, {checked} synopses checked, {skipped} skipped (each "
          f"with its reason), {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
