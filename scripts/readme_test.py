#!/usr/bin/env python3
"""The README's walk-throughs, run as a new user runs them, against a fresh Herald.

    HERALD_BIN=… DATABASE_URL=… python3 scripts/readme_test.py

It creates a new database beside DATABASE_URL's (so job ids start at j1, as after a first
`make run`), makes the app `demo` and its keys with scripts/demo.sh (as `make run` does) in a
`.herald/` folder of a scratch copy of the project folder, and starts `herald serve` on a free
port. Then it runs every shell block of the README's "Walk-through" sections, and the metrics
block of "Operations", in one bash shell, in order, step by step. A step is a command and the
comment lines under it; a comment that starts like an answer (`# {`, `# [`, `# 204`,
`# whsec_…`, `# herald_…`, `# j8 …`, `# WWW-Authenticate…`), with its indented continuation
lines, is what the step must print: whitespace aside, with `…` standing for anything, each one
matches a line of the step's output, in order. Lines under "the receiver prints" are the
background receiver's output. Every output line that starts with `{` must be one JSON value
(responses that run together fail). A step that only reads (no -X, -d, & or assignment) is run
again for up to 10 s while it does not match, since deliveries are asynchronous.

It fails, naming the README line, on any example the service does not really return.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ANSWER = re.compile(r"^(\{|\[|\d|whsec_|herald_|WWW-|j\d+ )")


def fail(message):
    print(f"readme: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


class Step:
    def __init__(self, line):
        self.line = line          # README line of the step's first command
        self.command = []
        self.expected = []        # (README line, text) of each answer
        self.background = []      # answers printed by the background receiver

    def reads_only(self):
        text = "\n".join(self.command)
        return not re.search(r"(^|\s)-X\s|(^|\s)-d\s|&\s|&$|^\s*[A-Za-z_][A-Za-z_0-9]*=", text, re.M)


def blocks(readme):
    """The shell blocks to run: those of the Walk-through sections, and the metrics example."""
    section, inside, start, body = "", False, 0, []
    for number, line in enumerate(readme.splitlines(), 1):
        if not inside and line.startswith("## "):
            section = line[3:]
        if not inside and line.strip() == "```sh":
            inside, start, body = True, number + 1, []
        elif inside and line.strip() == "```":
            inside = False
            wanted = section.startswith("Walk-through") or (
                section == "Operations" and any("herald_events_total" in b for b in body))
            if wanted:
                yield start, body
        elif inside:
            body.append(line)


def steps(start, body):
    """Splits a block into steps: command lines, then the comments about them."""
    result, step, in_answer, receiver, commented = [], None, False, False, False
    for offset, line in enumerate(body):
        number = start + offset
        stripped = line.strip()
        if step is not None and step.command and continues(step) and not commented:
            step.command.append(line)          # a backslash, a pipe or an open quote goes on
            continue
        if stripped.startswith("#"):
            commented = True
            if step is None:
                continue                       # a comment before any command: prose
            text = stripped[1:]
            answer = re.sub(r"\s{2,}\(.*\)$", "", text.strip())   # "…  (21: the latest migration)"
            target = step.background if receiver else step.expected
            if text.startswith("  ") and in_answer:
                target[-1] = (target[-1][0], target[-1][1] + answer)
            elif text.startswith(" ") and ANSWER.match(answer):
                target.append((number, answer))
                in_answer = True
            else:
                in_answer = False
                receiver = "the receiver prints" in text
        elif stripped == "":
            commented = True
            in_answer = receiver = False
        else:
            if step is None or commented:
                step = Step(number)
                result.append(step)
            step.command.append(line)
            commented = in_answer = receiver = False
    return result


def continues(step):
    """Whether the step's last command line goes on to the next line."""
    text = "\n".join(step.command).rstrip()
    return text.endswith("\\") or text.endswith("|") or quotes_open(text)


def quotes_open(text):
    single = double = False
    escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and not single:
            escaped = True
        elif char == "'" and not double:
            single = not single
        elif char == '"' and not single:
            double = not double
    return single or double


def pattern(expected):
    return re.compile(".*?".join(re.escape(part) for part in squeeze(expected).split("…")))


def squeeze(text):
    return re.sub(r"\s+", "", text)


def matches(expected, lines):
    """Each expected answer matches one output line, in order."""
    position = 0
    squeezed = [squeeze(line) for line in lines]
    for number, text in expected:
        regex = pattern(text)
        while position < len(squeezed) and not regex.fullmatch(squeezed[position]):
            position += 1
        if position == len(squeezed):
            return number, text
        position += 1
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    binary = os.environ.get("HERALD_BIN") or fail("HERALD_BIN is not set")
    database_url = os.environ.get("DATABASE_URL") or fail("DATABASE_URL is not set")
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    plan = [step for start, body in blocks(readme) for step in steps(start, body)]
    checked = sum(len(s.expected) + len(s.background) for s in plan)
    if checked < 40:
        fail(f"only {checked} answers found in the README's walk-throughs: the parser lost them")

    # A fresh database in the same cluster, as a first `make run` has.
    name = f"herald_readme_{os.getpid()}"
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", database_url, "-c", f"CREATE DATABASE {name}"],
                   check=True, stdout=subprocess.DEVNULL)
    url = re.sub(r"^(postgres(?:ql)?://[^/?]*/)[^?]*", rf"\g<1>{name}", database_url)
    if url == database_url:
        fail(f"cannot name a new database in {database_url!r}")

    work = tempfile.mkdtemp(prefix="herald-readme.")
    server = receiver_port = None
    try:
        state = os.path.join(work, ".herald")
        os.mkdir(state, 0o700)
        os.symlink(os.path.join(ROOT, "scripts"), os.path.join(work, "scripts"))
        admin = os.urandom(24).hex()
        env = dict(os.environ, DATABASE_URL=url, HERALD_ADMIN_TOKEN=admin, HERALD_LISTEN="127.0.0.1:0",
                   HERALD_THREADS="4", HERALD_DRAIN_TIMEOUT_SECONDS="5",
                   # as `make run` sets it: the webhook walk-through's receiver is on 127.0.0.1
                   HERALD_DELIVERY_ALLOW_PRIVATE="1")
        with open(os.path.join(state, "admin-token"), "w") as f:
            f.write(admin)
        # The app `demo` and .herald/demo-keys exactly as `make run` makes them.
        subprocess.run([os.path.join(ROOT, "scripts", "demo.sh"), binary, state], env=env, check=True,
                       stdout=subprocess.DEVNULL)

        log = open(os.path.join(work, "server.log"), "w+")
        server = subprocess.Popen([binary, "serve"], env=env, stdout=log, stderr=subprocess.STDOUT)
        port = None
        for _ in range(300):
            log.seek(0)
            for line in log:
                if '"listening"' in line:
                    port = json.loads(line).get("port")
            if port or server.poll() is not None:
                break
            time.sleep(0.1)
        if not port:
            log.seek(0)
            fail(f"herald serve did not start:\n{log.read()}")
        receiver_port = free_port()
        print(f"readme: herald serve on 127.0.0.1:{port}, {len(plan)} steps, {checked} answers", file=sys.stderr)

        shell = subprocess.Popen(["bash", "--norc", "--noprofile"], cwd=work, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                                 env=dict(os.environ, HOME=work))
        background_file = None
        for index, step in enumerate(plan):
            command = "\n".join(step.command)
            command = command.replace("127.0.0.1:8080", f"127.0.0.1:{port}")
            command = command.replace("127.0.0.1:9000", f"127.0.0.1:{receiver_port}")
            command = command.replace("webhook_receiver.py 9000", f"webhook_receiver.py {receiver_port}")
            output_file = os.path.join(work, f"step-{index}.out")
            if re.search(r"&\s|&$", command, re.M) and "&&" not in command:
                background_file = output_file
            deadline = time.time() + (10 if step.reads_only() else 0)
            while True:
                shell.stdin.write(f"{{\n{command}\n}} > {output_file} 2>&1 < /dev/null\necho __step_done__ $?\n")
                shell.stdin.flush()
                while True:
                    line = shell.stdout.readline()
                    if not line:
                        fail(f"README line {step.line}: the shell exited")
                    if line.startswith("__step_done__"):
                        break
                with open(output_file, encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
                missing = matches(step.expected, lines)
                if missing is None or time.time() > deadline:
                    break
                time.sleep(0.3)
            if missing is not None:
                fail(f"README line {missing[0]} says\n    {missing[1]}\n"
                     f"but the command at line {step.line} printed:\n    " + "\n    ".join(lines or ["(nothing)"]))
            for line in lines:
                if line.startswith("{"):
                    try:
                        json.loads(line)
                    except ValueError:
                        fail(f"README line {step.line}: an output line is not one JSON value "
                             f"(two responses run together?):\n    {line}")
            if step.background:
                if background_file is None:
                    fail(f"README line {step.background[0][0]}: no background receiver is running")
                deadline = time.time() + 10
                while True:
                    with open(background_file, encoding="utf-8", errors="replace") as f:
                        printed = f.read().splitlines()
                    # The receiver prints each job as it arrives, in any order.
                    absent = [e for e in step.background if not any(pattern(e[1]).fullmatch(squeeze(p)) for p in printed)]
                    if not absent or time.time() > deadline:
                        break
                    time.sleep(0.2)
                if absent:
                    fail(f"README line {absent[0][0]} says the receiver prints\n    {absent[0][1]}\n"
                         f"but it printed:\n    " + "\n    ".join(printed or ["(nothing)"]))
        shell.stdin.close()
        shell.wait(timeout=30)
        print(f"readme: all {checked} answers of the README's walk-throughs are what Herald returned", file=sys.stderr)
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        if receiver_port is not None:        # the README's `kill %1` stops it; a failed run may not get there
            subprocess.run(["pkill", "-f", f"webhook_receiver.py {receiver_port}"])
        subprocess.run(["psql", "-q", database_url, "-c", f"DROP DATABASE IF EXISTS {name}"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
