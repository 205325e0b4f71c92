#!/usr/bin/env python3
"""Checks that the operations files still describe the code (issue 40); part of `make test`.

  python3 scripts/ops-check.py [path/to/herald]

1. variables: every variable Herald reads (Configuration.variables, and any "HERALD_…" literal
   in Sources/Herald* and Sources/herald) is in the README's Configuration table, in the
   Kubernetes ConfigMap or Secret example, and in deploy/systemd/herald.env.example; and no
   deploy file, nor a README table row, names one that Herald does not read.
2. packages: the build stage of deploy/Dockerfile and scripts/deps.sh install every Debian package
   Package.swift's system libraries name; every shared library `ldd` lists for the binary comes
   (`dpkg -S`) from a runtime package of the Dockerfile, one of their dependencies, or a package
   of priority required (in every Debian base image). The Swift runtime libraries are skipped:
   the image links them statically (--static-swift-stdlib).
3. openapi: the /v1/me operations of openapi/openapi.json match their /v1/users twins.
4. monitoring: deploy/prometheus/herald-rules.yml passes `promtool check rules` (Debian's
   `prometheus` package), and the Grafana dashboard's queries parse as PromQL (checked the same
   way, as recording rules); both files and every docs/*.md are named in the README.
(That the dashboard's and the rules' metric names exist in /metrics is a Swift test that scrapes
a running Herald: MetricsTests.)
Each failure names the file and the value; exit 1 on any.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
failures = []


def fail(message):
    failures.append(message)
    print("ops-check: FAIL " + message, file=sys.stderr)


def read(path):
    return (ROOT / path).read_text()


# 1. variables -----------------------------------------------------------------------------------
def check_variables():
    configuration = read("Sources/HeraldDomain/Support/Configuration.swift")
    block = configuration.split("package static let variables", 1)[1].split("\n    ]\n", 1)[0]
    declared = set(re.findall(r'\("((?:HERALD_|DATABASE_URL)[A-Z_]*)"', block))
    read_in_code = set()
    for folder in ("Sources/HeraldDomain", "Sources/HeraldStore", "Sources/HeraldAPI", "Sources/HeraldApp", "Sources/herald"):
        for source in (ROOT / folder).rglob("*.swift"):
            read_in_code |= set(re.findall(r'"(HERALD_[A-Z0-9_]+)"', source.read_text()))
    for name in sorted(read_in_code - declared):
        fail(f"Sources: {name} is used in the code but not in Configuration.variables")
    known = declared | read_in_code

    readme = read("README.md")
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    in_table = set(re.findall(r"^\| `((?:HERALD_|DATABASE_URL)[A-Z0-9_]*)`", table, re.M))
    kubernetes = read("deploy/kubernetes/configmap.yaml") + read("deploy/kubernetes/secret.example.yaml")
    in_kubernetes = set(re.findall(r"^  ((?:HERALD_|DATABASE_URL)[A-Z0-9_]*):", kubernetes, re.M))
    in_env = set(re.findall(r"^#?((?:HERALD_|DATABASE_URL)[A-Z0-9_]*)=", read("deploy/systemd/herald.env.example"), re.M))
    # HERALD_TEST_… are the tests' hooks: in the README's table (marked tests only), never in
    # what operators deploy
    hooks = {name for name in known if name.startswith("HERALD_TEST_")}
    for where, names in (("README.md Configuration table", in_table),
                         ("deploy/kubernetes/configmap.yaml + secret.example.yaml", in_kubernetes),
                         ("deploy/systemd/herald.env.example", in_env)):
        expected = known if where.startswith("README") else known - hooks
        for name in sorted(expected - names):
            fail(f"{where}: {name} is missing")
        for name in sorted(names & hooks) if not where.startswith("README") else []:
            fail(f"{where}: {name} is a test hook, not for deployments")
        for name in sorted(names - known):
            fail(f"{where}: {name} is not a variable Herald reads")
    for path in ("deploy/Dockerfile", "deploy/docker-compose.yml", "deploy/README.md", "deploy/systemd/herald.service",
                 "deploy/kubernetes/deployment.yaml", "deploy/kubernetes/migrate-job.yaml",
                 "deploy/kubernetes/configmap.yaml", "deploy/kubernetes/secret.example.yaml",
                 "deploy/systemd/herald.env.example"):
        for name in sorted(set(re.findall(r"\bHERALD_[A-Z0-9_]*[A-Z0-9]\b", read(path))) - known):
            fail(f"{path}: names {name}, which Herald does not read")
    print(f"ops-check: {len(known)} variables, in the README table, Kubernetes and the env example")


# 2. packages ------------------------------------------------------------------------------------
def apt_list(stage):
    match = re.search(r"apt-get install -y -q --no-install-recommends ([^\\\n]+)", stage)
    return set(match.group(1).split()) if match else set()


def installed_packages():
    out = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Status}\t${Priority}\t${Essential}\t${Pre-Depends}, ${Depends}\t${Provides}\n"],
                         capture_output=True, text=True, check=True).stdout
    packages, provides = {}, {}
    for line in out.splitlines():
        name, status, priority, essential, depends, provided = (line.split("\t") + [""] * 6)[:6]
        if "installed" not in status.split():
            continue
        alternatives = []
        for clause in depends.split(","):
            names = [re.split(r"[ :(]", alt.strip())[0] for alt in clause.split("|") if alt.strip()]
            if names:
                alternatives.append(names)
        packages[name] = (priority, essential == "yes", alternatives)
        for alias in provided.split(","):
            alias = re.split(r"[ (]", alias.strip())[0]
            if alias:
                provides.setdefault(alias, set()).add(name)
    return packages, provides


def closure(roots, packages, provides):
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        for real in ({name} if name in packages else provides.get(name, set())):
            if real in seen:
                continue
            seen.add(real)
            for alternatives in packages[real][2]:
                todo.extend(alternatives)
    return seen


def check_packages(binary):
    dockerfile = read("deploy/Dockerfile")
    stages = re.split(r"^FROM ", dockerfile, flags=re.M)
    build, runtime = apt_list(stages[1]), apt_list(stages[-1])
    providers = set()
    for match in re.findall(r"\.apt\(\[([^\]]*)\]\)", read("Package.swift")):
        providers |= set(re.findall(r'"([^"]+)"', match))
    deps = set(re.search(r"packages=\(([^)]*)\)", read("scripts/deps.sh")).group(1).split())
    for name in sorted(providers | {"pkg-config"}):
        if name not in build:
            fail(f"deploy/Dockerfile: the build stage does not install {name} (Package.swift needs it)")
        if name not in deps:
            fail(f"scripts/deps.sh: does not install {name} (Package.swift needs it)")
    if not binary or not os.path.exists(binary):
        fail(f"no herald binary at {binary!r} to run ldd on (build first, or pass its path)")
        return
    toolchain = pathlib.Path(shutil.which("swift") or "/nonexistent").resolve().parent.parent
    ldd = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    libraries = re.findall(r"^\s*(\S+) => (\S+)", ldd, re.M)
    missing_paths = [name for name, path in libraries if path == "not"]
    for name in missing_paths:
        fail(f"ldd {binary}: {name} not found on this machine")
    packages, provides = installed_packages()
    allowed = closure(runtime, packages, provides)
    allowed |= closure([name for name, (priority, essential, _) in packages.items() if priority == "required" or essential],
                       packages, provides)
    checked = 0
    for name, path in libraries:
        if path == "not":
            continue
        real = pathlib.Path(path).resolve()
        if toolchain in real.parents:
            continue   # the Swift runtime: linked statically into the image's binary
        owner = None
        for candidate in {path, str(real), re.sub(r"^/usr/lib/", "/lib/", str(real)), re.sub(r"^/lib/", "/usr/lib/", str(real)),
                          re.sub(r"^/lib/", "/usr/lib/", path), re.sub(r"^/usr/lib/", "/lib/", path)}:
            result = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if result.returncode == 0:
                owner = result.stdout.split(":")[0].strip()
                break
        checked += 1
        if owner is None:
            fail(f"ldd {binary}: {name} ({path}) belongs to no Debian package")
        elif owner not in allowed:
            fail(f"deploy/Dockerfile: the runtime stage does not provide {name} (package {owner}); add it to the runtime apt-get install")
    print(f"ops-check: {checked} shared libraries of {binary} provided by the runtime stage ({' '.join(sorted(runtime))})")


# 3. openapi --------------------------------------------------------------------------------------
def check_openapi():
    if subprocess.run([sys.executable, str(ROOT / "scripts/openapi_me.py")]).returncode != 0:
        fail("openapi/openapi.json: the /v1/me operations are stale (python3 scripts/openapi_me.py --write)")


# 4. monitoring ----------------------------------------------------------------------------------
def check_monitoring():
    readme = read("README.md")
    for path in ["deploy/grafana/herald.json", "deploy/prometheus/herald-rules.yml"] + \
            sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")):
        if path not in readme:
            fail(f"README.md: does not name {path}")
    dashboard = json.loads(read("deploy/grafana/herald.json"))
    expressions = []
    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("expr"), str):
                expressions.append(node["expr"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(dashboard.get("panels", []))
    if len(expressions) < 5:
        fail(f"deploy/grafana/herald.json: only {len(expressions)} queries")
    promtool = shutil.which("promtool")
    if not promtool:
        fail("promtool is not installed (Debian package prometheus; scripts/deps.sh installs it)")
        return
    rules = ROOT / "deploy/prometheus/herald-rules.yml"
    result = subprocess.run([promtool, "check", "rules", str(rules)], capture_output=True, text=True)
    if result.returncode != 0:
        fail(f"promtool check rules {rules.relative_to(ROOT)}:\n{result.stdout}{result.stderr}")
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as temporary:
        lines = ["groups:", "  - name: dashboard", "    rules:"]
        for index, expression in enumerate(expressions):
            expression = expression.replace("$__rate_interval", "5m").replace("$__interval", "1m")
            lines += [f"      - record: dashboard:query_{index}", f"        expr: {json.dumps(expression)}"]
        temporary.write("\n".join(lines) + "\n")
        temporary.flush()
        result = subprocess.run([promtool, "check", "rules", temporary.name], capture_output=True, text=True)
        if result.returncode != 0:
            fail(f"deploy/grafana/herald.json: a query is not PromQL:\n{result.stdout}{result.stderr}")
    print(f"ops-check: promtool accepts the rules and the dashboard's {len(expressions)} queries")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HERALD_BIN") or str(ROOT / ".build/release/herald")
    check_variables()
    check_packages(binary)
    check_openapi()
    check_monitoring()
    if failures:
        print(f"ops-check: {len(failures)} failure(s)", file=sys.stderr)
        return 1
    print("ops-check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
